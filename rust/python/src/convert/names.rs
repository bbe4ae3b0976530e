//! String options: each a table of the names an argument accepts and the value each stands
//! for, parsed in one place with one message ("reference = 'wrld' is not accepted; expected
//! 'world', 'local' or 'local_world_aligned'").

use crate::errors::INPUT_ERROR;
use nalgebra::Vector3;
use pyo3::prelude::*;
use vidyn_optim::{DescentModel, Method};
use vidyn_rbd::{Joint, ReferenceFrame};

/// The names of a string argument `arg` and their values (a value may have several names;
/// the first is its own).
pub struct Names<T: 'static> {
    arg: &'static str,
    table: &'static [(&'static str, T)],
}

impl<T: Copy + PartialEq> Names<T> {
    /// The value named `name`, or `InputError` naming the argument, the value and the names
    /// accepted.
    pub fn parse(&self, name: &str) -> PyResult<T> {
        self.table.iter().find(|(n, _)| *n == name).map(|(_, v)| *v).ok_or_else(|| {
            let names: Vec<String> = self.table.iter().map(|(n, _)| format!("'{n}'")).collect();
            let (last, first) = names.split_last().map_or((String::new(), &[][..]), |(l, f)| (l.clone(), f));
            let expected = if first.is_empty() { last } else { format!("{} or {last}", first.join(", ")) };
            INPUT_ERROR.err(format!("{} = '{name}' is not accepted; expected {expected}", self.arg))
        })
    }

    /// The name of `value` (its first in the table).
    pub fn name(&self, value: T) -> &'static str {
        self.table.iter().find(|(_, v)| *v == value).map_or("?", |(n, _)| n)
    }
}

/// `jacobian(reference=…)`.
pub const REFERENCE: Names<ReferenceFrame> = Names {
    arg: "reference",
    table: &[("world", ReferenceFrame::World), ("local", ReferenceFrame::Local), ("local_world_aligned", ReferenceFrame::LocalWorldAligned)],
};

/// `optim.ilqr(method=…)`.
pub const METHOD: Names<Method> = Names { arg: "method", table: &[("ilqr", Method::Ilqr), ("ddp", Method::Ddp)] };

/// `optim.projection(model=…)`, the descent model.
pub const DESCENT_MODEL: Names<DescentModel> = Names {
    arg: "model",
    table: &[
        ("steepest", DescentModel::Steepest),
        ("quasi", DescentModel::QuasiNewton),
        ("quasi-newton", DescentModel::QuasiNewton),
        ("newton", DescentModel::Newton),
        ("auto", DescentModel::Auto),
    ],
};

/// `ModelBuilder.add_body(joint=…)`: the kind (the axis of a revolute or prismatic joint is
/// the `axis` argument's; `z` here only stands in for it).
pub const JOINT: Names<Joint> = Names {
    arg: "joint",
    table: &[
        ("revolute", Joint::Revolute { axis: Vector3::new(0.0, 0.0, 1.0) }),
        ("prismatic", Joint::Prismatic { axis: Vector3::new(0.0, 0.0, 1.0) }),
        ("spherical", Joint::Spherical),
        ("freeflyer", Joint::FreeFlyer),
        ("planar", Joint::Planar),
    ],
};
