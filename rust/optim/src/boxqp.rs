//! Box-constrained quadratic programme `min ½ xᵀHx + gᵀx, lower ≤ x ≤ upper` by projected
//! Newton (Bertsekas 1982), as in Tassa, Mansard & Todorov, "Control-limited differential
//! dynamic programming", ICRA 2014 (their `boxQP`).
//!
//! Each iteration splits the variables into *clamped* (at a bound with the gradient pushing
//! outwards) and *free*; it takes the Newton step on the free ones (Cholesky of `H_ff`),
//! projects it onto the box and backtracks (Armijo). The result carries the Cholesky factor
//! of `H_ff` at the solution, which iLQR uses for the feedback gains of the free directions
//! (clamped directions get zero feedback).

use nalgebra::{Cholesky, DMatrix, DVector, Dyn};

/// Why [`box_qp`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoxQpStatus {
    /// `H_ff` is not positive definite (the caller should regularise).
    HessianNotPositiveDefinite,
    /// No descent direction (`gᵀd ≥ 0`) or the line search failed: stationary to round-off.
    NoDescent,
    /// Iteration cap.
    MaxIterations,
    /// Relative improvement below threshold.
    SmallImprovement,
    /// Free-subspace gradient below threshold.
    SmallGradient,
    /// Every dimension is clamped.
    AllClamped,
}

impl BoxQpStatus {
    /// True when the solution is usable.
    #[must_use]
    pub fn ok(self) -> bool {
        !matches!(self, Self::HessianNotPositiveDefinite)
    }
}

/// Solution of [`box_qp`]: `x`, the free mask and the Cholesky factor of `H_ff` (`None`
/// when every variable is clamped).
#[derive(Clone, Debug)]
pub struct BoxQpSolution {
    pub x: DVector<f64>,
    pub free: Vec<bool>,
    pub chol_free: Option<Cholesky<f64, Dyn>>,
    pub status: BoxQpStatus,
    pub iterations: usize,
}

fn clamp(x: &DVector<f64>, lower: &DVector<f64>, upper: &DVector<f64>) -> DVector<f64> {
    DVector::from_iterator(x.len(), (0..x.len()).map(|i| x[i].max(lower[i]).min(upper[i])))
}

fn value(h: &DMatrix<f64>, g: &DVector<f64>, x: &DVector<f64>) -> f64 {
    x.dot(g) + 0.5 * x.dot(&(h * x))
}

fn sub_matrix(h: &DMatrix<f64>, idx: &[usize]) -> DMatrix<f64> {
    DMatrix::from_fn(idx.len(), idx.len(), |i, j| h[(idx[i], idx[j])])
}

/// Solves the box QP from the warm start `x0` (projected onto the box). `H` must be
/// symmetric; `lower ≤ upper` element-wise (equal bounds fix a variable).
#[must_use]
pub fn box_qp(h: &DMatrix<f64>, g: &DVector<f64>, lower: &DVector<f64>, upper: &DVector<f64>, x0: &DVector<f64>) -> BoxQpSolution {
    const MAX_ITER: usize = 100;
    const MIN_GRAD: f64 = 1e-12;
    const MIN_REL_IMPROVE: f64 = 1e-12;
    const STEP_DEC: f64 = 0.6;
    const MIN_STEP: f64 = 1e-22;
    const ARMIJO: f64 = 0.1;
    let n = g.len();
    let mut x = clamp(x0, lower, upper);
    let mut val = value(h, g, &x);
    let mut free = vec![true; n];
    let mut old_free: Option<Vec<bool>> = None;
    let mut chol: Option<Cholesky<f64, Dyn>> = None;
    let mut status = BoxQpStatus::MaxIterations;
    let mut iterations = 0;
    for it in 0..MAX_ITER {
        iterations = it + 1;
        let grad = g + h * &x;
        for i in 0..n {
            let clamped = (x[i] <= lower[i] && grad[i] > 0.0) || (x[i] >= upper[i] && grad[i] < 0.0) || lower[i] == upper[i];
            free[i] = !clamped;
        }
        if free.iter().all(|f| !f) {
            chol = None;
            status = BoxQpStatus::AllClamped;
            break;
        }
        let idx: Vec<usize> = (0..n).filter(|&i| free[i]).collect();
        if old_free.as_ref() != Some(&free) {
            match sub_matrix(h, &idx).cholesky() {
                Some(c) => chol = Some(c),
                None => {
                    chol = None;
                    status = BoxQpStatus::HessianNotPositiveDefinite;
                    break;
                }
            }
            old_free = Some(free.clone());
        }
        let gnorm = idx.iter().map(|&i| grad[i] * grad[i]).sum::<f64>().sqrt();
        if gnorm < MIN_GRAD {
            status = BoxQpStatus::SmallGradient;
            break;
        }
        // Newton step on the free set with the clamped variables held: the free part of
        // g + H x_c, where x_c keeps only the clamped entries of x
        let mut xc = x.clone();
        for &i in &idx {
            xc[i] = 0.0;
        }
        let gc = g + h * &xc;
        let rhs = DVector::from_iterator(idx.len(), idx.iter().map(|&i| gc[i]));
        let sol = chol.as_ref().expect("factorised above").solve(&rhs);
        let mut search = DVector::zeros(n);
        for (j, &i) in idx.iter().enumerate() {
            search[i] = -sol[j] - x[i];
        }
        let sdotg = search.dot(&grad);
        if sdotg >= 0.0 {
            status = BoxQpStatus::NoDescent;
            break;
        }
        let mut step = 1.0;
        let mut accepted = None;
        while step >= MIN_STEP {
            let xn = clamp(&(&x + &search * step), lower, upper);
            let vn = value(h, g, &xn);
            if (vn - val) / (step * sdotg) >= ARMIJO {
                accepted = Some((xn, vn));
                break;
            }
            step *= STEP_DEC;
        }
        let Some((xn, vn)) = accepted else {
            status = BoxQpStatus::NoDescent;
            break;
        };
        let improvement = val - vn;
        x = xn;
        val = vn;
        if improvement.abs() < MIN_REL_IMPROVE * val.abs().max(1e-300) {
            status = BoxQpStatus::SmallImprovement;
            break;
        }
    }
    // the factor must belong to the final free set
    if status.ok() && status != BoxQpStatus::AllClamped {
        let grad = g + h * &x;
        for i in 0..n {
            free[i] = !((x[i] <= lower[i] && grad[i] > 0.0) || (x[i] >= upper[i] && grad[i] < 0.0) || lower[i] == upper[i]);
        }
        if old_free.as_ref() != Some(&free) {
            let idx: Vec<usize> = (0..n).filter(|&i| free[i]).collect();
            chol = if idx.is_empty() { None } else { sub_matrix(h, &idx).cholesky() };
            if chol.is_none() && !idx.is_empty() {
                status = BoxQpStatus::HessianNotPositiveDefinite;
            }
        }
    }
    BoxQpSolution { x, free, chol_free: chol, status, iterations }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unconstrained_matches_newton() {
        let h = DMatrix::from_row_slice(2, 2, &[4.0, 1.0, 1.0, 3.0]);
        let g = DVector::from_vec(vec![1.0, -2.0]);
        let big = DVector::from_element(2, 1e9);
        let s = box_qp(&h, &g, &(-&big), &big, &DVector::zeros(2));
        let exact = -h.clone().lu().solve(&g).unwrap();
        assert!((s.x - exact).amax() < 1e-12);
        assert!(s.free.iter().all(|&f| f));
    }

    #[test]
    fn clamped_solution_is_kkt() {
        // min ½xᵀHx + gᵀx on [-1, 1]²: brute-force check of the KKT conditions
        let h = DMatrix::from_row_slice(3, 3, &[2.0, 0.5, 0.1, 0.5, 1.0, 0.2, 0.1, 0.2, 3.0]);
        let g = DVector::from_vec(vec![-10.0, 0.3, 5.0]);
        let lo = DVector::from_element(3, -1.0);
        let hi = DVector::from_element(3, 1.0);
        let s = box_qp(&h, &g, &lo, &hi, &DVector::zeros(3));
        let grad = &g + &h * &s.x;
        for i in 0..3 {
            if s.x[i] > -1.0 + 1e-12 && s.x[i] < 1.0 - 1e-12 {
                assert!(grad[i].abs() < 1e-9, "{i}: {}", grad[i]);
            } else if s.x[i] >= 1.0 - 1e-12 {
                assert!(grad[i] <= 1e-9);
            } else {
                assert!(grad[i] >= -1e-9);
            }
        }
        assert!(!s.free[0] && !s.free[2]);
    }
}
