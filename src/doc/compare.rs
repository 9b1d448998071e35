//! The `compare` document: two results, item by item, with a verdict each.

use serde::{Deserialize, Serialize};

use super::dist::{Nanoseconds, Summary};
use super::rule::RuleDoc;
use super::{Kind, VERSION};
use crate::stats::change::Change;

/// Relative changes of the point estimates, in percent (`None` from 0).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ChangePct {
    /// of the median
    pub p50: Option<f64>,
    /// of the 99th percentile
    pub p99: Option<f64>,
    /// of the mean
    pub mean: Option<f64>,
}

/// One item present on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    /// span, configuration or command
    pub name: String,
    /// side and group, when any
    pub group: Option<String>,
    /// the earlier result's statistics
    pub before: Summary,
    /// the later result's
    pub after: Summary,
    /// point changes
    pub change_pct: ChangePct,
    /// verdict, basis, ratios and intervals, reason (flattened)
    #[serde(flatten)]
    pub change: Change,
}

impl Compared {
    /// `name [group]`
    pub fn label(&self) -> String {
        super::label(&self.name, self.group.as_deref())
    }
}

/// The `compare` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareDoc {
    /// `compare`
    pub kind: Kind,
    /// format version
    pub version: u32,
    /// ns
    pub unit: Nanoseconds,
    /// the earlier result's file
    pub before: String,
    /// the later result's file
    pub after: String,
    /// the verdict's thresholds
    pub rule: RuleDoc,
    /// items on both sides
    pub items: Vec<Compared>,
    /// present only before (`name [group]`)
    #[serde(default)]
    pub only_before: Vec<String>,
    /// present only after
    #[serde(default)]
    pub only_after: Vec<String>,
    /// how items were paired, when not by name
    #[serde(default)]
    pub notes: Vec<String>,
}

impl CompareDoc {
    /// An empty comparison of `before` and `after`.
    pub fn new(before: String, after: String, rule: RuleDoc) -> CompareDoc {
        CompareDoc {
            kind: Kind::Compare,
            version: VERSION,
            unit: Nanoseconds::Ns,
            before,
            after,
            rule,
            items: Vec::new(),
            only_before: Vec::new(),
            only_after: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub(super) fn check(&self) -> Result<(), String> {
        for i in &self.items {
            i.before
                .check()
                .and_then(|_| i.after.check())
                .map_err(|e| format!("{}: {e}", i.label()))?;
        }
        Ok(())
    }
}
