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
//! The schema (one file per result, zstd, one row group):
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

/// The rows of a result, as the module doc says.
pub fn rows(doc: &SpansDoc) -> Result<Vec<Row>, String> {
    let mut out = Vec::new();
    for s in &doc.spans {
        let kept: Vec<u64> = doc
            .records
            .iter()
            .filter(|r| r.span == s.name && r.group == s.group)
            .map(|r| r.latency_ns)
            .collect();
        let row = |value_ns, bucket, count| Row {
            span: s.name.clone(),
            side: s.side.clone(),
            by: s.by.clone(),
            group: s.group.clone(),
            value_ns,
            bucket,
            count,
        };
        if !doc.records.is_empty()
            && doc.records_dropped == 0
            && kept.len() as u64 == s.latency.summary.count
        {
            for v in kept {
                out.push(row(Some(ns(v)?), None, 1));
            }
        } else if let Some(hdr) = &s.latency.histogram.hdr {
            let (min, max) = bounds(s);
            for (value, count) in hdr.points()? {
                let v = ns((value as u64).clamp(min, max))?;
                out.extend(std::iter::repeat_n(row(Some(v), None, 1), count as usize));
            }
        } else {
            // Log-linear (live) or log2 (bpftrace imports) buckets: rows as they are.
            for b in &s.latency.histogram.buckets {
                out.push(row(None, Some((ns(b.min)?, ns(b.max)?)), ns(b.count)?));
            }
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

/// Writes the rows of `doc` as a zstd Parquet file to `out`.
pub fn write<W: std::io::Write + Send>(doc: &SpansDoc, run: &Run, out: W) -> Result<usize, String> {
    let rows = rows(doc)?;
    let schema = Arc::new(parse_message_type(SCHEMA).map_err(|e| e.to_string())?);
    let level = ZstdLevel::try_new(3).map_err(|e| e.to_string())?;
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .build(),
    );
    let mut writer = SerializedFileWriter::new(out, schema, props).map_err(|e| e.to_string())?;
    let mut group = writer.next_row_group().map_err(|e| e.to_string())?;
    let n = rows.len();
    let source = source_name(doc.source);
    let text = |f: &dyn Fn(&Row) -> Option<String>| -> Vec<Option<String>> {
        rows.iter().map(f).collect()
    };
    let int =
        |f: &dyn Fn(&Row) -> Option<i64>| -> Vec<Option<i64>> { rows.iter().map(f).collect() };
    let columns: Vec<Column> = vec![
        Column::Text(vec![run.host.clone(); n]),
        Column::Text(vec![Some(run.run_id.clone()); n]),
        Column::Int(vec![run.run_time_ms; n]),
        Column::Text(vec![Some(source.to_string()); n]),
        Column::Text(text(&|r| Some(r.span.clone()))),
        Column::Text(text(&|r| r.side.clone())),
        Column::Text(text(&|r| r.by.clone())),
        Column::Text(text(&|r| r.group.clone())),
        Column::Int(int(&|r| r.value_ns)),
        Column::Int(int(&|r| r.bucket.map(|b| b.0))),
        Column::Int(int(&|r| r.bucket.map(|b| b.1))),
        Column::Int(int(&|r| Some(r.count))),
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
                let (data, levels) = split(values, required, |s| ByteArray::from(s.as_str()));
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
    writer.close().map_err(|e| e.to_string())?;
    Ok(n)
}

enum Column {
    Text(Vec<Option<String>>),
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
        let n = write(doc, run, &mut file).unwrap();
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
