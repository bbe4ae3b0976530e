//! [`Actuation`]: which joints the optimiser's controls drive. An integrator takes the
//! generalised forces of all its `n` joints; an optimisation controls `m ≤ n` of them. This is
//! the one place that maps between the two (controls out, `B` columns and second-order control
//! blocks in), for every integrator the optimisers drive.

use crate::error::{OptimError, Result};
use nalgebra::DMatrix;

/// The actuated joints `actuated[0] < … < actuated[m−1]` among `n`; control `j` is the
/// generalised force of joint `actuated[j]`, the other joints get zero force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actuation {
    n: usize,
    actuated: Vec<usize>,
}

impl Actuation {
    /// `actuated`: strictly increasing joint indices `< n`, at least one; `None` for all `n`.
    ///
    /// # Errors
    /// Any other list, named in the message.
    pub fn new(n: usize, actuated: Option<Vec<usize>>) -> Result<Self> {
        let actuated = actuated.unwrap_or_else(|| (0..n).collect());
        if actuated.is_empty() || actuated.windows(2).any(|w| w[0] >= w[1]) || actuated.iter().any(|&i| i >= n) {
            return Err(OptimError::InvalidInput(format!("actuated = {actuated:?}: expected strictly increasing joint indices in 0..{n}, at least one")));
        }
        Ok(Self { n, actuated })
    }
    /// The actuated joints.
    #[must_use]
    pub fn joints(&self) -> &[usize] {
        &self.actuated
    }
    /// Controls per step, `m`.
    #[must_use]
    pub fn nu(&self) -> usize {
        self.actuated.len()
    }
    /// The generalised forces of all `n` joints, `full` `(n,)`, of the controls `u` `(m,)`.
    pub fn expand(&self, u: &[f64], full: &mut [f64]) {
        full.fill(0.0);
        for (&j, &x) in self.actuated.iter().zip(u) {
            full[j] = x;
        }
    }
    /// [`Actuation::expand`] of every step: `(N, n)` from `(N, m)`, row-major.
    #[must_use]
    pub fn expand_all(&self, u: &[f64]) -> Vec<f64> {
        let m = self.nu();
        let mut full = vec![0.0; u.len() / m * self.n];
        for (uk, fk) in u.chunks_exact(m).zip(full.chunks_exact_mut(self.n.max(1))) {
            self.expand(uk, fk);
        }
        full
    }
    /// The actuated columns of a full `B` (`rows × n`) into `b` (`rows × m`).
    pub fn select_columns(&self, full: &DMatrix<f64>, b: &mut DMatrix<f64>) {
        for (c, &j) in self.actuated.iter().enumerate() {
            b.column_mut(c).copy_from(&full.column(j));
        }
    }
    /// The control blocks of λ-contracted second derivatives over all joints, `hxu` `(nx, n)`
    /// and `huu` `(n, n)`, restricted to the actuated joints: `hux` `(m, nx)` (`= hxuᵀ`) and
    /// `huu` `(m, m)`.
    pub fn select_second_order(&self, full_hxu: &DMatrix<f64>, full_huu: &DMatrix<f64>, hux: &mut DMatrix<f64>, huu: &mut DMatrix<f64>) {
        for (r, &i) in self.actuated.iter().enumerate() {
            for c in 0..full_hxu.nrows() {
                hux[(r, c)] = full_hxu[(c, i)];
            }
            for (cc, &j) in self.actuated.iter().enumerate() {
                huu[(r, cc)] = full_huu[(i, j)];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_controls_and_columns_of_the_actuated_joints() {
        let act = Actuation::new(4, Some(vec![1, 3])).unwrap();
        let mut full = [9.0; 4];
        act.expand(&[2.0, 5.0], &mut full);
        assert_eq!(full, [0.0, 2.0, 0.0, 5.0]);
        assert_eq!(act.expand_all(&[1.0, 2.0, 3.0, 4.0]), vec![0.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0]);
        let b_full = DMatrix::from_fn(3, 4, |r, c| (10 * r + c) as f64);
        let mut b = DMatrix::zeros(3, 2);
        act.select_columns(&b_full, &mut b);
        assert_eq!(b, DMatrix::from_fn(3, 2, |r, c| (10 * r + [1, 3][c]) as f64));
        let huu_full = DMatrix::from_fn(4, 4, |r, c| (10 * r + c) as f64);
        let (mut hux, mut huu) = (DMatrix::zeros(2, 3), DMatrix::zeros(2, 2));
        act.select_second_order(&b_full, &huu_full, &mut hux, &mut huu);
        assert_eq!(hux, b.transpose());
        assert_eq!(huu, DMatrix::from_row_slice(2, 2, &[11.0, 13.0, 31.0, 33.0]));
    }

    #[test]
    fn bad_lists_are_errors() {
        for bad in [vec![], vec![1, 1], vec![2, 1], vec![4]] {
            let e = Actuation::new(4, Some(bad.clone())).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")) && e.contains("0..4"), "{e}");
        }
        assert_eq!(Actuation::new(3, None).unwrap().joints(), &[0, 1, 2]);
    }
}
