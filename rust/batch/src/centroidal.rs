//! Batched centre-of-mass and centroidal quantities (issue 26): the `vidyn_rbd` functions over
//! a leading batch axis, with the conventions of [`crate::dynamics`] (row `i` is exactly the
//! single call on row `i`, copied out in C order; a failed row is NaN and listed).

use crate::dynamics::{row, workspace, Shapes};
use rayon::prelude::*;
use vidyn_rbd::{self as rbd, Model, RbdError};
use vidyn_system::engine::run_rows;
use vidyn_system::{matrix_to_rows, BatchError, Control, Failures};

type Result<T> = std::result::Result<T, BatchError<RbdError>>;

/// Batched [`vidyn_rbd::center_of_mass`]: `com` `(batch, 3)` from `q` `(batch, nq)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn center_of_mass(model: &Model, control: &Control, batch: usize, q: &[f64], com: &mut [f64]) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.out(com, "com", 3, "(batch, 3)")?;
    Ok(run_rows(control, com.par_chunks_mut(3), &workspace(model), 1, |ws, i, out| {
        out.copy_from_slice(rbd::center_of_mass(model, ws, s.q(i))?.as_slice());
        Ok(())
    }))
}

/// Batched [`vidyn_rbd::com_jacobian`]: `jac` `(batch, 3, nv)` from `q` `(batch, nq)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn com_jacobian(model: &Model, control: &Control, batch: usize, q: &[f64], jac: &mut [f64]) -> Result<Failures<RbdError>> {
    matrices_of_q(model, control, batch, q, jac, 3, rbd::com_jacobian)
}

/// Batched [`vidyn_rbd::centroidal_momentum_matrix`]: `ag` `(batch, 6, nv)` from `q`
/// `(batch, nq)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn centroidal_momentum_matrix(model: &Model, control: &Control, batch: usize, q: &[f64], ag: &mut [f64]) -> Result<Failures<RbdError>> {
    matrices_of_q(model, control, batch, q, ag, 6, rbd::centroidal_momentum_matrix)
}

/// Batched [`vidyn_rbd::centroidal_momentum`]: `hg` `(batch, 6)` (`[linear; angular]`) from
/// `q` `(batch, nq)` and `v` `(batch, nv)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn centroidal_momentum(model: &Model, control: &Control, batch: usize, q: &[f64], v: &[f64], hg: &mut [f64]) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.tangent(v, "v")?;
    s.out(hg, "hg", 6, "(batch, 6)")?;
    Ok(run_rows(control, hg.par_chunks_mut(6), &workspace(model), 1, |ws, i, out| {
        out.copy_from_slice(rbd::centroidal_momentum(model, ws, s.q(i), row(v, i, s.nv))?.to_vector().as_slice());
        Ok(())
    }))
}

/// Batched [`vidyn_rbd::centroidal_momentum_matrix_time_variation`]: `dag` `(batch, 6, nv)`
/// from `q` `(batch, nq)` and `v` `(batch, nv)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn centroidal_momentum_matrix_time_variation(
    model: &Model,
    control: &Control,
    batch: usize,
    q: &[f64],
    v: &[f64],
    dag: &mut [f64],
) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.tangent(v, "v")?;
    s.out(dag, "dag", 6 * s.nv, "(batch, 6, model.nv)")?;
    if s.nv == 0 {
        return Ok(Vec::new());
    }
    Ok(run_rows(control, dag.par_chunks_mut(6 * s.nv), &workspace(model), 1, |ws, i, out| {
        matrix_to_rows(rbd::centroidal_momentum_matrix_time_variation(model, ws, s.q(i), row(v, i, s.nv))?, out);
        Ok(())
    }))
}

/// A `(rows, nv)` matrix of `q` per row, `out` `(batch, rows, nv)` in C order.
fn matrices_of_q(
    model: &Model,
    control: &Control,
    batch: usize,
    q: &[f64],
    out: &mut [f64],
    rows: usize,
    f: impl for<'w> Fn(&Model, &'w mut rbd::Workspace, &[f64]) -> rbd::Result<&'w nalgebra::DMatrix<f64>> + Sync,
) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.out(out, "out", rows * s.nv, &format!("(batch, {rows}, model.nv)"))?;
    if s.nv == 0 {
        return Ok(Vec::new());
    }
    Ok(run_rows(control, out.par_chunks_mut(rows * s.nv), &workspace(model), 1, |ws, i, o| {
        matrix_to_rows(f(model, ws, s.q(i))?, o);
        Ok(())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use vidyn_rbd::builders::random_tree;
    use vidyn_rbd::Joint;

    /// Every row is the single call's, bit for bit; a row with a NaN fails alone (NaN out).
    #[test]
    fn rows_are_the_single_calls() {
        let model = random_tree(6, 3, &Joint::examples());
        let (nq, nv, b) = (model.nq, model.nv, 5);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut q: Vec<f64> = (0..b).flat_map(|_| rbd::random_configuration(&model, &mut rng)).collect();
        let v: Vec<f64> = (0..b * nv).map(|k| (k as f64 * 0.37).sin()).collect();
        q[3 * nq] = f64::NAN;
        let control = Control::new();
        let (mut com, mut hg, mut ag) = (vec![0.0; b * 3], vec![0.0; b * 6], vec![0.0; b * 6 * nv]);
        assert_eq!(center_of_mass(&model, &control, b, &q, &mut com).unwrap().len(), 1);
        assert_eq!(centroidal_momentum(&model, &control, b, &q, &v, &mut hg).unwrap().len(), 1);
        assert_eq!(centroidal_momentum_matrix(&model, &control, b, &q, &mut ag).unwrap()[0].0, 3);
        let mut ws = model.workspace();
        for i in [0, 1, 2, 4] {
            let c = rbd::center_of_mass(&model, &mut ws, &q[i * nq..(i + 1) * nq]).unwrap();
            assert_eq!(&com[i * 3..(i + 1) * 3], c.as_slice());
            let h = rbd::centroidal_momentum(&model, &mut ws, &q[i * nq..(i + 1) * nq], &v[i * nv..(i + 1) * nv]).unwrap();
            assert_eq!(&hg[i * 6..(i + 1) * 6], h.to_vector().as_slice());
            let a = rbd::centroidal_momentum_matrix(&model, &mut ws, &q[i * nq..(i + 1) * nq]).unwrap();
            for r in 0..6 {
                for c in 0..nv {
                    assert_eq!(ag[i * 6 * nv + r * nv + c].to_bits(), a[(r, c)].to_bits());
                }
            }
        }
        assert!(com[9..12].iter().chain(&hg[18..24]).all(|x| x.is_nan()));
    }
}
