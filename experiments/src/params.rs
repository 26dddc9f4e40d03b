//! Parameter values as they appear in experiment files and in records.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// One parameter's value at one point of a sweep.
#[derive(Debug, Clone, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    /// A whole number; byte sizes are stored in bytes.
    Int(i64),
    /// A real number.
    Float(f64),
    /// A word from a fixed set ("h2d", "pinned").
    Text(String),
}

impl ParamValue {
    /// The value as a float, if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParamValue::Int(v) => Some(*v as f64),
            ParamValue::Float(v) => Some(*v),
            ParamValue::Text(_) => None,
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v}"),
            ParamValue::Text(v) => write!(f, "{v}"),
        }
    }
}

/// A point's parameters, by name, in a stable order.
pub type Params = BTreeMap<String, ParamValue>;

/// A point's measured or predicted figures, by name ("time_us", "gb_per_s", ...).
pub type Metrics = BTreeMap<String, f64>;
