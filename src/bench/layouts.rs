//! Layouts: is a change real, or code and memory layout?
//!
//! **Why.** The address of a hot loop, of the stack, of the heap moves a program's speed by more
//! than many changes people benchmark: Mytkowicz et al. ("Producing wrong data without doing
//! anything obviously wrong", ASPLOS 2009) moved SPEC run times by double-digit percentages with
//! the size of the environment and the link order alone; Stabilizer (Curtsinger and Berger,
//! ASPLOS 2013) re-randomized layout and found -O3 against -O2 to be noise. The same instructions
//! in different time (SwiftNIO's 23% and 14%) were an unlucky placement of a hot function. A
//! benchmark of one layout per program cannot tell that from a real change.
//!
//! **What.** `bench --layouts K` runs every command under K layouts. Layout `l` has a seed
//! (`--seed` + l) and, from it, a padding of 0–4095 bytes: the environment variable
//! `LATSCOPE_LAYOUT_PAD` of that many `X`s (what hyperfine does at random per run, here seeded
//! and recorded with every run), which moves the initial stack. With `--relink CMD`, CMD is run
//! once per layout with `{seed}` replaced, and the commands' `{seed}` names that layout's binaries
//! (e.g. compiled with `-ffunction-sections`, linked by lld 13+ with
//! `-Wl,--shuffle-sections=*=SEED`), so the code moves too. Blocks go through the layouts in
//! shuffled rounds, so each layout gets the same number of runs, spread over the whole benchmark
//! like every other interleaving.
//!
//! **The band.** A command's median time (wall, or CPU with `--time cpu`) under each layout is
//! an A/A experiment: the same command, only its layout changed. The spread of one command is
//! `max ÷ min` of its per-layout medians; the layout-noise band of a comparison is the wider
//! spread of its two commands. A change whose interval lies inside the band is `within layout
//! noise` ([`crate::stats::change::within_layout_noise`]): a relink could move it as much. The
//! band also holds each per-layout median's own sampling noise, which only widens it: it never
//! makes a layout effect look smaller than measured.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::doc::rule::Clock;
use crate::doc::run::{Layout, RunMeasure};
use crate::stats::ab;

/// The environment variable that pads a run's environment.
pub const PAD_VARIABLE: &str = "LATSCOPE_LAYOUT_PAD";

/// Padding sizes are drawn from 0 to this (exclusive), as hyperfine's.
pub const MAX_PAD: u32 = 4096;

/// A layout's spread is computed only from medians of at least this many runs.
pub const MIN_RUNS_PER_LAYOUT: usize = 3;

/// The placeholder replaced by a layout's seed in `--relink` and in the commands.
pub const SEED_PLACEHOLDER: &str = "{seed}";

/// The `k` layouts of a benchmark seeded with `seed`: seeds `seed`, `seed + 1`, ..., and each
/// one's padding drawn from its own seed (the same seed always pads the same).
pub fn layouts(k: u32, seed: u64) -> Vec<Layout> {
    (0..k)
        .map(|index| {
            let seed = seed.wrapping_add(u64::from(index));
            let env_pad = Pcg64::seed_from_u64(seed).random_range(0..MAX_PAD);
            Layout {
                index,
                seed,
                env_pad,
            }
        })
        .collect()
}

/// `text` with every `{seed}` replaced by the layout's seed.
pub fn with_seed(text: &str, layout: &Layout) -> String {
    text.replace(SEED_PLACEHOLDER, &layout.seed.to_string())
}

/// The environment of a run under `layout`: this process's environment without any padding of
/// its own, plus the layout's padding variable, as `NAME=value` entries.
pub fn environment(layout: &Layout) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let mut env: Vec<Vec<u8>> = std::env::vars_os()
        .filter(|(k, _)| k != PAD_VARIABLE)
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .collect();
    let pad = "X".repeat(layout.env_pad as usize);
    env.push(format!("{PAD_VARIABLE}={pad}").into_bytes());
    env
}

/// Per command and layout, the median wall time; per command, the spread of its medians.
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutTable {
    /// the layouts, by index
    pub layouts: Vec<Layout>,
    /// per command, per layout: median time in ns on the verdict's clock (`None`: no run)
    pub medians: Vec<Vec<Option<f64>>>,
    /// per command, per layout: runs
    pub runs: Vec<Vec<usize>>,
    /// per command: `max ÷ min − 1` of its per-layout medians (`None` unless every layout has
    /// [`MIN_RUNS_PER_LAYOUT`] runs)
    pub spread: Vec<Option<f64>>,
}

impl LayoutTable {
    /// The table of timed runs that carry layouts, on `clock`, with every layout of `declared`
    /// (the benchmark's `--layouts`, also those no run reached before it stopped: they count,
    /// with no runs); `None` with fewer than two layouts.
    pub fn of(timed: &[Vec<RunMeasure>], clock: Clock, declared: &[Layout]) -> Option<LayoutTable> {
        // A layout is its index and its seed: `bench --compare` of two documents run with
        // different --seed has a layout 0 of each seed, which are not the same layout.
        let mut found: BTreeMap<(u32, u64), Layout> =
            declared.iter().map(|l| ((l.index, l.seed), *l)).collect();
        for l in timed.iter().flatten().filter_map(|r| r.layout) {
            found.entry((l.index, l.seed)).or_insert(l);
        }
        if found.len() < 2 {
            return None;
        }
        let layouts: Vec<Layout> = found.into_values().collect();
        let mut medians = Vec::new();
        let mut runs = Vec::new();
        let mut spread = Vec::new();
        for command in timed {
            let walls: Vec<Vec<f64>> = layouts
                .iter()
                .map(|l| {
                    command
                        .iter()
                        .filter(|r| {
                            r.layout
                                .is_some_and(|x| (x.index, x.seed) == (l.index, l.seed))
                        })
                        .map(|r| clock.of(r) as f64)
                        .collect()
                })
                .collect();
            let m: Vec<Option<f64>> = walls.iter().map(|w| ab::median(w)).collect();
            // Over the layouts this command ran under (in one benchmark, all of them: blocks
            // go through the layouts in rounds), each with enough runs for its median.
            // A declared layout counts even where no run reached it.
            let ran: Vec<usize> = (0..layouts.len())
                .filter(|&i| !walls[i].is_empty() || declared.contains(&layouts[i]))
                .collect();
            let enough =
                ran.len() >= 2 && ran.iter().all(|&i| walls[i].len() >= MIN_RUNS_PER_LAYOUT);
            let ran_medians: Vec<Option<f64>> = ran.iter().map(|&i| m[i]).collect();
            spread.push(enough.then(|| spread_of(&ran_medians)).flatten());
            runs.push(walls.iter().map(Vec::len).collect());
            medians.push(m);
        }
        Some(LayoutTable {
            layouts,
            medians,
            runs,
            spread,
        })
    }

    /// The layout-noise band of candidate `c` against the baseline: the wider of their spreads.
    pub fn band(&self, c: usize) -> Option<f64> {
        let (a, b) = (
            self.spread.first()?.as_ref()?,
            self.spread.get(c)?.as_ref()?,
        );
        Some(a.max(*b))
    }
}

/// `max ÷ min − 1` of positive medians.
fn spread_of(medians: &[Option<f64>]) -> Option<f64> {
    let m: Vec<f64> = medians.iter().copied().collect::<Option<Vec<f64>>>()?;
    let lo = m.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = m.iter().copied().fold(0.0, f64::max);
    (lo > 0.0).then(|| hi / lo - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(wall: u64, index: u32) -> RunMeasure {
        RunMeasure {
            wall_ns: wall,
            user_ns: wall,
            sys_ns: 0,
            max_rss_kb: 0,
            voluntary_cs: 0,
            involuntary_cs: 0,
            minor_faults: 0,
            exit_code: Some(0),
            timed_out: false,
            counters: Vec::new(),
            layout: Some(Layout {
                index,
                seed: 10 + u64::from(index),
                env_pad: 0,
            }),
        }
    }

    #[test]
    fn layouts_are_seeded_consecutively_and_pad_the_same_for_the_same_seed() {
        let a = layouts(4, 7);
        let seeds: Vec<u64> = a.iter().map(|l| l.seed).collect();
        assert_eq!(seeds, [7, 8, 9, 10]);
        assert!(a.iter().all(|l| l.env_pad < MAX_PAD));
        // Layout 8 of a run seeded 7 is layout 8 of a run seeded 8.
        assert_eq!(layouts(1, 8)[0].env_pad, a[1].env_pad);
        // Different seeds pad differently (four equal draws from 4096 would be a broken RNG).
        assert!(a.iter().any(|l| l.env_pad != a[0].env_pad));
        assert_eq!(with_seed("cc -o a-{seed} {seed}.c", &a[2]), "cc -o a-9 9.c");
    }

    #[test]
    fn the_environment_carries_exactly_one_padding_of_the_layouts_size() {
        let l = Layout {
            index: 0,
            seed: 1,
            env_pad: 123,
        };
        let env = environment(&l);
        let pads: Vec<&Vec<u8>> = env
            .iter()
            .filter(|e| e.starts_with(b"LATSCOPE_LAYOUT_PAD="))
            .collect();
        assert_eq!(pads.len(), 1);
        assert_eq!(pads[0].len(), "LATSCOPE_LAYOUT_PAD=".len() + 123);
        assert!(env.iter().any(|e| e.starts_with(b"PATH=")));
    }

    #[test]
    fn the_band_is_the_wider_spread_of_per_layout_medians() {
        // Baseline: layout 0 runs 100, 101, 99 → median 100; layout 1: 104, 105, 106 → 105.
        // Spread 105/100 − 1 = 5%. Candidate: 200 and 202 → 1%. Band: 5%.
        let base = vec![
            run(100, 0),
            run(104, 1),
            run(101, 0),
            run(105, 1),
            run(99, 0),
            run(106, 1),
        ];
        let cand = vec![
            run(200, 0),
            run(202, 1),
            run(199, 0),
            run(203, 1),
            run(201, 0),
            run(201, 1),
        ];
        let t = LayoutTable::of(&[base.clone(), cand], Clock::Wall, &[]).unwrap();
        assert_eq!(t.medians[0], [Some(100.0), Some(105.0)]);
        assert_eq!(t.medians[1], [Some(200.0), Some(202.0)]);
        assert_eq!(t.runs[0], [3, 3]);
        assert!((t.spread[0].unwrap() - 0.05).abs() < 1e-12);
        assert!((t.spread[1].unwrap() - 0.01).abs() < 1e-12);
        assert!((t.band(1).unwrap() - 0.05).abs() < 1e-12);
        assert_eq!(t.layouts[1].seed, 11);
        // Two runs under a layout are too few for a spread; one layout is no table.
        let short = LayoutTable::of(&[base[..4].to_vec()], Clock::Wall, &[]).unwrap();
        assert_eq!(short.spread, [None]);
        let one: Vec<RunMeasure> = base.iter().filter(|r| r.wall_ns < 103).cloned().collect();
        assert!(LayoutTable::of(std::slice::from_ref(&one), Clock::Wall, &[]).is_none());
        // A benchmark of 4 layouts stopped before layouts 2 and 3 had a run: all 4 are in the
        // table (no runs, no median, no spread), not only those the runs carry.
        let declared: Vec<Layout> = (0..4)
            .map(|index| Layout {
                index,
                seed: 10 + u64::from(index),
                env_pad: 7,
            })
            .collect();
        let t = LayoutTable::of(std::slice::from_ref(&base), Clock::Wall, &declared).unwrap();
        assert_eq!(t.layouts.len(), 4);
        assert_eq!(t.runs[0], [3, 3, 0, 0]);
        assert_eq!(t.medians[0][2..], [None, None]);
        assert_eq!(t.spread, [None]);
        let t = LayoutTable::of(&[one], Clock::Wall, &declared[..2]).unwrap();
        assert_eq!(t.runs[0], [3, 0]);
        // `bench --compare` of documents run with different seeds: layout 0 of seed 10 is not
        // layout 0 of seed 20. Each command's spread is over its own layouts.
        let reseeded = |r: &RunMeasure| RunMeasure {
            layout: r.layout.map(|l| Layout {
                seed: l.seed + 10,
                ..l
            }),
            ..r.clone()
        };
        let cand: Vec<RunMeasure> = base
            .iter()
            .map(|r| RunMeasure {
                wall_ns: r.wall_ns * 2,
                ..reseeded(r)
            })
            .collect();
        let t = LayoutTable::of(&[base.clone(), cand], Clock::Wall, &[]).unwrap();
        let seeds: Vec<u64> = t.layouts.iter().map(|l| l.seed).collect();
        assert_eq!(seeds, [10, 20, 11, 21]);
        assert_eq!(t.medians[0], [Some(100.0), None, Some(105.0), None]);
        assert_eq!(t.medians[1], [None, Some(200.0), None, Some(210.0)]);
        assert!((t.spread[0].unwrap() - 0.05).abs() < 1e-12, "{t:?}");
        assert!((t.spread[1].unwrap() - 0.05).abs() < 1e-12, "{t:?}");
    }
}
