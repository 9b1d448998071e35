//! Judging many items at once: a bootstrap per item is independent work, so `compare` (per
//! item) and `bench` (per metric) spread it over the cores with the one helper here, in stats/
//! beside the statistics it runs, where both can take it.

/// `f` over `items` on up to all cores, results in order.
pub fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len())
        .max(1);
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(|| part.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("comparison thread"))
            .collect()
    })
}
