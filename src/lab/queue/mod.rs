//! The submission-pipeline lab: the model ([`model`]) and real threads ([`real`]), reported per
//! stage ([`report`]).

pub mod model;
pub mod real;
pub mod report;
