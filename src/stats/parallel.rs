//! Judging many items at once: a bootstrap per item is independent work, so `compare` (per
//! item) and `bench` (per metric) spread it over the cores with the one helper here, in stats/
//! beside the statistics it runs, where both can take it.

/// `f` over `items` on up to all cores, results in order. A part whose thread cannot be
/// started (a process limit) is worked on the calling thread: the same results, later.
pub fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len())
        .max(1);
    let chunk = items.len().div_ceil(threads).max(1);
    let work = |part: &[T]| part.iter().map(&f).collect::<Vec<R>>();
    std::thread::scope(|scope| {
        let parts: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || work(part))
                    .map_err(|_| part)
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|part| match part {
                Ok(thread) => thread.join().expect("comparison thread"),
                Err(part) => work(part),
            })
            .collect()
    })
}
