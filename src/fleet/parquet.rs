//! `spans` results as Parquet rows for SQL engines (DuckDB, Spark, BigQuery).
//!
//! Why rows, and which: SQL engines compute quantiles over rows, not over histograms. A result
//! that knows its samples gives one row per sample (`value_ns` set, `count` 1): the individual
//! spans it kept (`records`, exact), else its HdrHistogram expanded (each value as HdrHistogram
//! keeps it: within 0.1%, clamped to the exact min and max). A result that knows only buckets
//! (`latscope live`: kernel log-linear buckets) gives one row per bucket (`bucket_min_ns`,
//! `bucket_max_ns` inclusive, `count`); inventing samples inside a bucket would look exact and
//! not be. So `quantile_cont(value_ns, 0.99)` works on sample rows, and bucket rows add up with
//! `sum(count)`.
//!
//! Sample rows are streamed: an HdrHistogram's values are repeated as they are written, and
//! the writer buffers one row group of [`ROW_GROUP`] rows at a time, so memory stays bounded
//! (about 40 bytes a buffered row) whatever the sample count; the count is summed first with
//! checked arithmetic and a result of more than `--max-rows` rows ([`DEFAULT_MAX_ROWS`]) is
//! refused before anything is written (2^40 samples would be days and terabytes).
//!
//! The schema (one file per result, zstd, row groups of 262,144 rows):
//!
//! ```text
//! message latscope_spans {
//!   optional binary host (STRING);        -- --host, NULL when not given
//!   required binary run_id (STRING);      -- --run-id, default: the result's file name
//!   optional int64 run_time (TIMESTAMP(MILLIS,true));  -- the result file's modification time
//!   required binary source (STRING);      -- live, wayland or trace
//!   required binary span (STRING);
//!   optional binary side (STRING);        -- client or server (wayland)
//!   optional binary by (STRING);          -- what groups split by (--by)
//!   optional binary group (STRING);
//!   optional int64 value_ns;              -- sample rows
//!   optional int64 bucket_min_ns;         -- bucket rows
//!   optional int64 bucket_max_ns;         -- bucket rows, inclusive
//!   required int64 count;                 -- 1 for a sample, the bucket's count for a bucket
//! }
//! ```
//!
//! Written with the `parquet` crate's low-level column writer, without the arrow stack (which
//! would add minutes of build for nothing this needs).

use std::sync::Arc;

use parquet::basic::{Compression, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use crate::doc::spans::{Series, Source, SpansDoc};

/// The schema, as documented in the module doc.
pub const SCHEMA: &str = "message latscope_spans {
  optional binary host (STRING);
  required binary run_id (STRING);
  optional int64 run_time (TIMESTAMP(MILLIS,true));
  required binary source (STRING);
  required binary span (STRING);
  optional binary side (STRING);
  optional binary by (STRING);
  optional binary group (STRING);
  optional int64 value_ns;
  optional int64 bucket_min_ns;
  optional int64 bucket_max_ns;
  required int64 count;
}";

/// What identifies the run in every row.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// the machine, if known
    pub host: Option<String>,
    /// the run
    pub run_id: String,
    /// when the result was written, ms since the epoch
    pub run_time_ms: Option<i64>,
}

/// One row (see the schema).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// span name
    pub span: String,
    /// side
    pub side: Option<String>,
    /// group field
    pub by: Option<String>,
    /// group
    pub group: Option<String>,
    /// a sample's value
    pub value_ns: Option<i64>,
    /// a bucket's bounds, `max` inclusive
    pub bucket: Option<(i64, i64)>,
    /// 1 or the bucket's count
    pub count: i64,
}

fn ns(v: u64) -> Result<i64, String> {
    i64::try_from(v).map_err(|_| format!("{v} ns does not fit Parquet's int64"))
}

/// A row as it is buffered: the series it belongs to (its text columns) and its numbers.
#[derive(Debug, Clone, Copy)]
struct Numbers {
    series: usize,
    value_ns: Option<i64>,
    bucket: Option<(i64, i64)>,
    count: i64,
}

/// How many rows a row group holds: the writer buffers one group, so this bounds its memory
/// (about 40 bytes a row) whatever the number of samples.
pub const ROW_GROUP: usize = 1 << 18;

/// The most rows `export --to parquet` writes unless told otherwise (`--max-rows`).
pub const DEFAULT_MAX_ROWS: u64 = 100_000_000;

/// Whether a series' rows are its kept spans (exact samples).
fn kept_spans_of(doc: &SpansDoc, s: &Series) -> Option<Vec<u64>> {
    if doc.records.is_empty() || doc.records_dropped != 0 {
        return None;
    }
    let kept: Vec<u64> = doc
        .records
        .iter()
        .filter(|r| r.span == s.name && r.group == s.group)
        .map(|r| r.latency_ns)
        .collect();
    (kept.len() as u64 == s.latency.summary.count).then_some(kept)
}

/// The rows of series `index`, lazily: an HdrHistogram's value is repeated `count` times as it
/// is written, never expanded in memory.
fn series_rows<'a>(
    doc: &'a SpansDoc,
    index: usize,
) -> Result<Box<dyn Iterator<Item = Result<Numbers, String>> + 'a>, String> {
    let s = &doc.spans[index];
    let sample = move |v: u64| {
        ns(v).map(|v| Numbers {
            series: index,
            value_ns: Some(v),
            bucket: None,
            count: 1,
        })
    };
    if let Some(kept) = kept_spans_of(doc, s) {
        return Ok(Box::new(kept.into_iter().map(sample)));
    }
    if let Some(hdr) = &s.latency.histogram.hdr {
        let (min, max) = bounds(s);
        let points = hdr.points()?;
        return Ok(Box::new(points.into_iter().flat_map(
            move |(value, count)| {
                let v = (value as u64).clamp(min, max);
                std::iter::repeat_n(v, count as usize).map(sample)
            },
        )));
    }
    // Log-linear (live) or log2 (bpftrace imports) buckets: rows as they are.
    Ok(Box::new(s.latency.histogram.buckets.iter().map(move |b| {
        Ok(Numbers {
            series: index,
            value_ns: None,
            bucket: Some((ns(b.min)?, ns(b.max)?)),
            count: ns(b.count)?,
        })
    })))
}

/// How many rows a result makes, summed with checked arithmetic (a forged count cannot wrap).
pub fn row_count(doc: &SpansDoc) -> Result<u64, String> {
    let mut total: u64 = 0;
    for s in &doc.spans {
        let n = if let Some(kept) = kept_spans_of(doc, s) {
            kept.len() as u64
        } else if let Some(hdr) = &s.latency.histogram.hdr {
            hdr.points()?
                .iter()
                .try_fold(0u64, |n, &(_, c)| n.checked_add(c))
                .ok_or_else(|| format!("{}: the sample counts overflow 64 bits", s.name))?
        } else {
            s.latency.histogram.buckets.len() as u64
        };
        total = total
            .checked_add(n)
            .ok_or("the sample counts overflow 64 bits")?;
    }
    Ok(total)
}

/// The rows of a result, as the module doc says (in memory: for tests and small results).
pub fn rows(doc: &SpansDoc) -> Result<Vec<Row>, String> {
    let mut out = Vec::new();
    for index in 0..doc.spans.len() {
        let s = &doc.spans[index];
        for n in series_rows(doc, index)? {
            let n = n?;
            out.push(Row {
                span: s.name.clone(),
                side: s.side.clone(),
                by: s.by.clone(),
                group: s.group.clone(),
                value_ns: n.value_ns,
                bucket: n.bucket,
                count: n.count,
            });
        }
    }
    Ok(out)
}

fn bounds(s: &Series) -> (u64, u64) {
    let summary = &s.latency.summary;
    (summary.min.unwrap_or(0), summary.max.unwrap_or(u64::MAX))
}

fn source_name(source: Source) -> &'static str {
    match source {
        Source::Wayland => "wayland",
        Source::Live => "live",
        Source::Trace => "trace",
    }
}

/// Why a result was not written as Parquet: the result, or the output.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The result cannot be written as rows (too many, a forged count).
    #[error("{0}")]
    Result(String),
    /// The output refused a write (a full disk): the output's fault, not the result's.
    #[error("{0}")]
    Output(std::io::Error),
}

/// Writes the rows of `doc` as a zstd Parquet file to `out`, in row groups of [`ROW_GROUP`]
/// rows; refuses a result of more than `max_rows` rows before writing any.
pub fn write<W: std::io::Write + Send>(
    doc: &SpansDoc,
    run: &Run,
    out: W,
    max_rows: u64,
) -> Result<u64, WriteError> {
    // The parquet crate turns the sink's errors into its own, as text like the result's
    // errors; the watcher keeps the sink's own error so that it is blamed on the output.
    let mut watched = Watched { out, error: None };
    write_rows(doc, run, &mut watched, max_rows).map_err(|e| match watched.error.take() {
        Some(io) => WriteError::Output(io),
        None => WriteError::Result(e),
    })
}

/// A sink that keeps a copy of the first error it returned.
struct Watched<W> {
    out: W,
    error: Option<std::io::Error>,
}

impl<W: std::io::Write> Watched<W> {
    fn kept<T>(&mut self, result: std::io::Result<T>) -> std::io::Result<T> {
        result.inspect_err(|e| {
            self.error.get_or_insert_with(|| match e.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(e.kind(), e.to_string()),
            });
        })
    }
}

impl<W: std::io::Write> std::io::Write for Watched<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let result = self.out.write(buf);
        self.kept(result)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.out.flush();
        self.kept(result)
    }
}

fn write_rows<W: std::io::Write + Send>(
    doc: &SpansDoc,
    run: &Run,
    out: W,
    max_rows: u64,
) -> Result<u64, String> {
    let total = row_count(doc)?;
    if total > max_rows {
        return Err(format!(
            "{total} rows (one per sample); at most {max_rows} (--max-rows raises the limit)"
        ));
    }
    let schema = Arc::new(parse_message_type(SCHEMA).map_err(|e| e.to_string())?);
    let level = ZstdLevel::try_new(3).map_err(|e| e.to_string())?;
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .build(),
    );
    let mut writer = SerializedFileWriter::new(out, schema, props).map_err(|e| e.to_string())?;
    let text = Text::of(doc, run);
    let mut chunk = Vec::with_capacity(ROW_GROUP.min(total as usize));
    let mut written = 0u64;
    for index in 0..doc.spans.len() {
        for row in series_rows(doc, index)? {
            chunk.push(row?);
            if chunk.len() == ROW_GROUP {
                write_group(&mut writer, &chunk, &text)?;
                written += chunk.len() as u64;
                chunk.clear();
            }
        }
    }
    // An empty result still gets its (empty) row group: readers see the columns.
    if !chunk.is_empty() || written == 0 {
        write_group(&mut writer, &chunk, &text)?;
        written += chunk.len() as u64;
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(written)
}

/// The columns a row takes from its run and series, made once; text is cloned per row: a row's are clones of these (a reference count, not a copy).
struct Text {
    host: Option<ByteArray>,
    run_id: ByteArray,
    run_time: Option<i64>,
    source: ByteArray,
    /// span, side, by, group of each series
    series: Vec<[Option<ByteArray>; 4]>,
}

impl Text {
    fn of(doc: &SpansDoc, run: &Run) -> Text {
        let bytes = |s: &str| ByteArray::from(s);
        Text {
            host: run.host.as_deref().map(bytes),
            run_id: bytes(&run.run_id),
            run_time: run.run_time_ms,
            source: bytes(source_name(doc.source)),
            series: doc
                .spans
                .iter()
                .map(|s| {
                    [
                        Some(bytes(&s.name)),
                        s.side.as_deref().map(bytes),
                        s.by.as_deref().map(bytes),
                        s.group.as_deref().map(bytes),
                    ]
                })
                .collect(),
        }
    }
}

/// Writes `rows` as one row group.
fn write_group<W: std::io::Write + Send>(
    writer: &mut SerializedFileWriter<W>,
    rows: &[Numbers],
    text: &Text,
) -> Result<(), String> {
    let mut group = writer.next_row_group().map_err(|e| e.to_string())?;
    let same = |v: &Option<ByteArray>| Column::Text(vec![v.clone(); rows.len()]);
    let of_series = |i: usize| {
        Column::Text(
            rows.iter()
                .map(|r| text.series[r.series][i].clone())
                .collect(),
        )
    };
    let int = |f: &dyn Fn(&Numbers) -> Option<i64>| Column::Int(rows.iter().map(f).collect());
    let columns: [Column; 12] = [
        same(&text.host),
        same(&Some(text.run_id.clone())),
        Column::Int(vec![text.run_time; rows.len()]),
        same(&Some(text.source.clone())),
        of_series(0),
        of_series(1),
        of_series(2),
        of_series(3),
        int(&|r| r.value_ns),
        int(&|r| r.bucket.map(|b| b.0)),
        int(&|r| r.bucket.map(|b| b.1)),
        int(&|r| Some(r.count)),
    ];
    let required_columns = [1, 3, 4, 11];
    for (index, column) in columns.into_iter().enumerate() {
        let mut w = group
            .next_column()
            .map_err(|e| e.to_string())?
            .ok_or("the schema has fewer columns than written")?;
        // The schema's required columns are never NULL: no definition levels for them.
        let required = required_columns.contains(&index);
        match column {
            Column::Text(values) => {
                let (data, levels) = split(values, required, ByteArray::clone);
                w.typed::<ByteArrayType>()
                    .write_batch(&data, levels.as_deref(), None)
                    .map_err(|e| e.to_string())?;
            }
            Column::Int(values) => {
                let (data, levels) = split(values, required, |v| *v);
                w.typed::<Int64Type>()
                    .write_batch(&data, levels.as_deref(), None)
                    .map_err(|e| e.to_string())?;
            }
        }
        w.close().map_err(|e| e.to_string())?;
    }
    group.close().map_err(|e| e.to_string())?;
    Ok(())
}

enum Column {
    Text(Vec<Option<ByteArray>>),
    Int(Vec<Option<i64>>),
}

/// The present values and, for an optional column, the definition levels (1 present, 0 NULL).
fn split<T, V>(
    values: Vec<Option<T>>,
    required: bool,
    f: impl Fn(&T) -> V,
) -> (Vec<V>, Option<Vec<i16>>) {
    let levels = (!required).then(|| values.iter().map(|v| i16::from(v.is_some())).collect());
    (values.iter().flatten().map(f).collect(), levels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::Latency;
    use crate::doc::spans::Counters;
    use crate::stats::Distribution;
    use crate::stats::loglinear::Bucketed;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    fn series(name: &str, latency: Latency) -> Series {
        Series {
            name: name.into(),
            side: None,
            by: None,
            group: None,
            latency,
            counters: Counters::default(),
        }
    }

    fn reader(doc: &SpansDoc, run: &Run) -> (usize, SerializedFileReader<std::fs::File>) {
        let mut file = tempfile::tempfile().unwrap();
        let n = write(doc, run, &mut file, DEFAULT_MAX_ROWS).unwrap() as usize;
        (n, SerializedFileReader::new(file).unwrap())
    }

    fn read_back(reader: SerializedFileReader<std::fs::File>) -> Vec<String> {
        reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap().to_string())
            .collect()
    }

    #[test]
    fn an_hdr_result_becomes_one_row_per_sample() {
        let mut d = Distribution::default();
        [100u64, 100, 250, 7].iter().for_each(|&v| d.record(v));
        let mut doc = SpansDoc::new(Source::Wayland);
        doc.spans.push(series("frame-done", Latency::of(&d)));
        let run = Run {
            host: Some("lab1".into()),
            run_id: "r1".into(),
            run_time_ms: Some(1_000),
        };
        let (n, file) = reader(&doc, &run);
        assert_eq!(n, 4);
        let rows = read_back(file);
        assert_eq!(rows.len(), 4);
        assert!(
            rows[0].contains("host: \"lab1\", run_id: \"r1\""),
            "{}",
            rows[0]
        );
        assert!(rows[0].contains("span: \"frame-done\""), "{}", rows[0]);
        assert!(
            rows[0].contains("value_ns: 7, bucket_min_ns: null"),
            "{}",
            rows[0]
        );
        assert!(rows[3].contains("value_ns: 250"), "{}", rows[3]);
    }

    #[test]
    fn a_live_result_becomes_one_row_per_bucket() {
        let mut b = Bucketed::default();
        [50_000u64, 50_001, 200_000]
            .iter()
            .for_each(|&v| b.record(v));
        let mut doc = SpansDoc::new(Source::Live);
        doc.spans.push(series("req", Latency::of_bucketed(&b)));
        let rows = rows(&doc).unwrap();
        // 50 000 and 50 001 share [49 152, 53 247]; 200 000 is in [196 608, 212 991].
        let got: Vec<(Option<(i64, i64)>, i64)> =
            rows.iter().map(|r| (r.bucket, r.count)).collect();
        assert_eq!(
            got,
            vec![(Some((49_152, 53_247)), 2), (Some((196_608, 212_991)), 1)]
        );
    }

    fn hdr_series(values: &[(u64, u64)]) -> Series {
        let mut d = Distribution::default();
        for &(v, n) in values {
            for _ in 0..n {
                d.record(v);
            }
        }
        series("req", Latency::of(&d))
    }

    #[test]
    fn many_samples_are_written_in_bounded_row_groups() {
        let mut doc = SpansDoc::new(Source::Wayland);
        doc.spans
            .push(hdr_series(&[(1000, ROW_GROUP as u64), (5000, 10)]));
        let (n, reader) = reader(&doc, &Run::default());
        assert_eq!(n, ROW_GROUP + 10);
        let meta = reader.metadata();
        assert_eq!(meta.num_row_groups(), 2);
        assert_eq!(meta.row_group(0).num_rows(), ROW_GROUP as i64);
        assert_eq!(meta.row_group(1).num_rows(), 10);
        assert_eq!(meta.file_metadata().num_rows(), (ROW_GROUP + 10) as i64);
    }

    #[test]
    fn a_result_of_more_rows_than_the_limit_is_refused_before_writing() {
        let mut doc = SpansDoc::new(Source::Wayland);
        doc.spans.push(hdr_series(&[(1000, 7), (5000, 4)]));
        let mut out = Vec::new();
        let e = write(&doc, &Run::default(), &mut out, 10).unwrap_err();
        assert!(matches!(e, WriteError::Result(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "11 rows (one per sample); at most 10 (--max-rows raises the limit)"
        );
        assert!(out.is_empty());
        assert_eq!(row_count(&doc).unwrap(), 11);
    }

    /// A sink that is full from its first byte, as `/dev/full` is.
    struct Full;

    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_sink_that_refuses_a_write_is_the_outputs_fault_with_its_own_error() {
        let mut doc = SpansDoc::new(Source::Wayland);
        doc.spans.push(hdr_series(&[(1000, 7)]));
        let e = write(&doc, &Run::default(), Full, DEFAULT_MAX_ROWS).unwrap_err();
        let WriteError::Output(io) = e else {
            panic!("blamed on the result: {e:?}");
        };
        assert_eq!(io.raw_os_error(), Some(libc::ENOSPC));
    }

    #[test]
    fn an_empty_result_is_a_valid_file_with_no_rows() {
        let doc = SpansDoc::new(Source::Live);
        let (n, reader) = reader(&doc, &Run::default());
        assert_eq!(n, 0);
        assert_eq!(reader.metadata().file_metadata().num_rows(), 0);
        assert_eq!(
            reader
                .metadata()
                .file_metadata()
                .schema_descr()
                .num_columns(),
            12
        );
    }
}
