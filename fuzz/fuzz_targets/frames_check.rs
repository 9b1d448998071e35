//! What every `frames` fuzz target checks of an analysis, whatever its input: every frame's
//! whole is the sum of its stages (the invariant the command promises on every log), and every
//! output is made without a panic.

use latscope::frames::Analysis;
use latscope::frames::stages::Stage;
use latscope::span::Aggregator;

pub fn check(a: &Analysis) {
    let offset = a.offset.map(|o| o.estimate_ns);
    for f in &a.frames {
        let at = |s| f.stage_ns(s, offset);
        if let (Some(x), Some(y), Some(z), Some(whole)) = (
            at(Stage::CommitToCompositor),
            at(Stage::CompositorToPresented),
            at(Stage::PresentedToClient),
            at(Stage::CommitToPresented),
        ) {
            assert_eq!(x + y + z, whole, "a frame's whole is the sum of its stages");
        }
    }
    let mut sink = Aggregator::new(Analysis::stage_names(), None);
    a.feed(&mut sink);
    let _ = a.summary();
    let _ = a.records(64);
}
