//! Input checks shared by the optimisers: lengths, finiteness and cost weights.

use crate::dense_kernels::symmetrise;
use crate::error::{OptimError, Result};
use nalgebra::DMatrix;

pub(crate) fn check_multiple(len: usize, n: usize, name: &str) -> Result<()> {
    if n == 0 || !len.is_multiple_of(n) {
        return Err(OptimError::InvalidInput(format!("{name} has {len} entries, not a multiple of {n}")));
    }
    Ok(())
}

/// The number of steps `N` of a trajectory whose states `x` have `(N+1)·nx` entries and controls
/// `u` `N·nu`; an error naming `what` otherwise.
pub(crate) fn trajectory_steps(what: &str, x: &[f64], u: &[f64], nx: usize, nu: usize) -> Result<usize> {
    let steps = u.len().checked_div(nu).unwrap_or(0);
    if x.len() != (steps + 1) * nx || u.len() != steps * nu {
        return Err(OptimError::InvalidInput(format!(
            "{what}: {} state and {} control entries do not make a trajectory of nx = {nx}, nu = {nu}",
            x.len(),
            u.len()
        )));
    }
    Ok(steps)
}

pub(crate) fn check_finite(x: &[f64], name: &str) -> Result<()> {
    if let Some((i, v)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(OptimError::InvalidInput(format!("{name}[{i}] is not finite ({v})")));
    }
    Ok(())
}

/// Checks that every weight of `list` (`name[k]`) is positive semi-definite: the quadratic
/// form `½ δᵀ W δ` of a weight with a negative eigenvalue rewards the deviation, and an
/// optimiser on it runs away (iLQR with `R = −1` reached a cost of −2.3e7) or solves a
/// problem that has no minimum. Only the symmetric part counts (the form's), and its
/// smallest eigenvalue may be negative by round-off, `n·1e-12·max|W|`. A weight equal to the
/// previous one is not checked again (stage weights are usually one matrix repeated).
pub(crate) fn check_weights(list: &[DMatrix<f64>], name: &str) -> Result<()> {
    for (k, w) in list.iter().enumerate() {
        if k > 0 && w == &list[k - 1] {
            continue;
        }
        let mut sym = w.clone();
        symmetrise(&mut sym);
        let tol = 1e-12 * w.nrows() as f64 * w.amax();
        let smallest = if w.nrows() == 0 { 0.0 } else { sym.symmetric_eigenvalues().min() };
        if smallest.is_nan() || smallest < -tol {
            let which = if list.len() == 1 { name.to_string() } else { format!("{name}[{k}]") };
            return Err(OptimError::InvalidInput(format!("{which} is not positive semi-definite: its smallest eigenvalue is {smallest:e}; a cost weight must be (symmetric) positive semi-definite, or the cost has no minimum")));
        }
    }
    Ok(())
}

/// The start of an optimisation: `x0` (`nx` finite entries) and the initial controls `u_init`
/// (`N·nu` finite entries, `N ≥ 1`). Returns `N`.
pub(crate) fn check_start(x0: &[f64], u_init: &[f64], nx: usize, nu: usize) -> Result<usize> {
    if x0.len() != nx {
        return Err(OptimError::InvalidInput(format!("x0 has {} entries, expected nx = {nx}", x0.len())));
    }
    check_finite(x0, "x0")?;
    check_multiple(u_init.len(), nu, "U_init")?;
    check_finite(u_init, "U_init")?;
    let steps = u_init.len() / nu;
    if steps == 0 {
        return Err(OptimError::InvalidInput("U_init must have at least one step".into()));
    }
    Ok(steps)
}
