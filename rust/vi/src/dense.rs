//! In-place LU factorisation with partial pivoting on preallocated storage (no allocation):
//! of `DMatrix` systems, and of the row-major `s × s` blocks of the O(n) Newton direction.
//! Used for the DEL Jacobian, whose `sn × sn` system is solved once per Newton iteration and
//! then reused for every right-hand side of the linearisation; and small matrix products.

use nalgebra::{DMatrix, DMatrixView, DMatrixViewMut};

/// Factors `a = P L U` in place (unit-diagonal `L` below, `U` on and above the diagonal);
/// `pivots[k]` is the row swapped with row `k`. Returns `false` when a pivot is below
/// `1e-14 · max|a|` (numerically singular).
pub(crate) fn lu_factor(a: &mut DMatrix<f64>, pivots: &mut [usize]) -> bool {
    let n = a.nrows();
    lu_factor_in(a.as_mut_slice(), n, pivots)
}

/// [`lu_factor`] of the column-major `n × n` matrix `a` (`n²` entries).
pub(crate) fn lu_factor_in(a: &mut [f64], n: usize, pivots: &mut [usize]) -> bool {
    let scale = a.iter().fold(0.0_f64, |m, x| m.max(x.abs())).max(f64::MIN_POSITIVE);
    for k in 0..n {
        let (mut p, mut best) = (k, a[k * n + k].abs());
        for r in k + 1..n {
            if a[k * n + r].abs() > best {
                best = a[k * n + r].abs();
                p = r;
            }
        }
        pivots[k] = p;
        if best <= 1e-14 * scale {
            return false;
        }
        if p != k {
            for col in a.chunks_exact_mut(n) {
                col.swap(k, p);
            }
        }
        let pivot = a[k * n + k];
        // column-major: column c is a[c n..(c+1) n]; the update of column c reads column k
        let (head, tail) = a.split_at_mut((k + 1) * n);
        let multipliers = &mut head[k * n + k + 1..];
        for m in multipliers.iter_mut() {
            *m /= pivot;
        }
        for col in tail.chunks_exact_mut(n) {
            let akc = col[k];
            if akc != 0.0 {
                axpy(&mut col[k + 1..], -akc, multipliers);
            }
        }
    }
    true
}

/// `y += a x` on equal-length slices (vectorisable, no bounds checks).
pub(crate) fn axpy(y: &mut [f64], a: f64, x: &[f64]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

/// Solves `A x = b` in place (`b` becomes `x`) with the factors of [`lu_factor`].
pub(crate) fn lu_solve(lu: &DMatrix<f64>, pivots: &[usize], b: &mut [f64]) {
    lu_solve_in(lu.as_slice(), lu.nrows(), pivots, b);
}

/// [`lu_solve`] with the factors of [`lu_factor_in`] (`n × n`, column-major).
pub(crate) fn lu_solve_in(columns: &[f64], n: usize, pivots: &[usize], b: &mut [f64]) {
    for k in 0..n {
        b.swap(k, pivots[k]);
    }
    for c in 0..n {
        let x = b[c];
        if x != 0.0 {
            axpy(&mut b[c + 1..], -x, &columns[c * n + c + 1..(c + 1) * n]);
        }
    }
    for c in (0..n).rev() {
        b[c] /= columns[c * n + c];
        let x = b[c];
        axpy(&mut b[..c], -x, &columns[c * n..c * n + c]);
    }
}

/// [`lu_solve_in`] for `W` right-hand sides at once, `b[k][c]` row `k` of right-hand side `c`:
/// each is rounded as [`lu_solve_in`] rounds it (which skips the updates by a zero, here made:
/// they change at most the sign of a zero).
pub(crate) fn lu_solve_lanes<const W: usize>(columns: &[f64], n: usize, pivots: &[usize], b: &mut [[f64; W]]) {
    for k in 0..n {
        b.swap(k, pivots[k]);
    }
    for c in 0..n {
        let x = b[c];
        for (r, &f) in (c + 1..n).zip(&columns[c * n + c + 1..(c + 1) * n]) {
            for l in 0..W {
                b[r][l] += -x[l] * f;
            }
        }
    }
    for c in (0..n).rev() {
        let d = columns[c * n + c];
        for l in 0..W {
            b[c][l] /= d;
        }
        let x = b[c];
        for (r, &f) in columns[c * n..c * n + c].iter().enumerate() {
            for l in 0..W {
                b[r][l] += -x[l] * f;
            }
        }
    }
}

/// Solves `Aᵀ x = b` in place with the factors of [`lu_factor`] (`P A = L U`, so
/// `Aᵀ = Uᵀ Lᵀ P`): forward substitution with `Uᵀ`, back substitution with the unit `Lᵀ`, then
/// the row swaps undone in reverse order. O(n²), no allocation.
pub(crate) fn lu_solve_transposed(lu: &DMatrix<f64>, pivots: &[usize], b: &mut [f64]) {
    lu_solve_transposed_in(lu.as_slice(), lu.nrows(), pivots, b);
}

/// [`lu_solve_transposed`] with the factors of [`lu_factor_in`] (`n × n`, column-major).
pub(crate) fn lu_solve_transposed_in(columns: &[f64], n: usize, pivots: &[usize], b: &mut [f64]) {
    for c in 0..n {
        let mut x = b[c];
        for (l, y) in columns[c * n..c * n + c].iter().zip(&b[..c]) {
            x -= l * y;
        }
        b[c] = x / columns[c * n + c];
    }
    for c in (0..n).rev() {
        let mut x = b[c];
        for (l, y) in columns[c * n + c + 1..(c + 1) * n].iter().zip(&b[c + 1..n]) {
            x -= l * y;
        }
        b[c] = x;
    }
    for k in (0..n).rev() {
        b.swap(k, pivots[k]);
    }
}

/// In-place LU with partial pivoting of the row-major `s × s` matrix `m`; returns the smallest
/// `|pivot|` (0 when exactly singular, NaN when not finite; the factors are then incomplete).
pub(crate) fn small_lu(m: &mut [f64], s: usize, piv: &mut [usize]) -> f64 {
    let mut min_pivot = f64::INFINITY;
    for k in 0..s {
        let mut best = k;
        for r in k + 1..s {
            if m[r * s + k].abs() > m[best * s + k].abs() {
                best = r;
            }
        }
        piv[k] = best;
        if best != k {
            for c in 0..s {
                m.swap(k * s + c, best * s + c);
            }
        }
        let pivot = m[k * s + k];
        min_pivot = min_pivot.min(pivot.abs());
        if pivot == 0.0 || !pivot.is_finite() {
            return if pivot.is_finite() { 0.0 } else { f64::NAN };
        }
        for r in k + 1..s {
            let f = m[r * s + k] / pivot;
            m[r * s + k] = f;
            for c in k + 1..s {
                m[r * s + c] -= f * m[k * s + c];
            }
        }
    }
    min_pivot
}

/// Solves `m x = b` in place with the factors of [`small_lu`].
pub(crate) fn small_solve(m: &[f64], s: usize, piv: &[usize], b: &mut [f64]) {
    for k in 0..s {
        b.swap(k, piv[k]);
    }
    for r in 1..s {
        let mut v = b[r];
        for c in 0..r {
            v -= m[r * s + c] * b[c];
        }
        b[r] = v;
    }
    for r in (0..s).rev() {
        let mut v = b[r];
        for c in r + 1..s {
            v -= m[r * s + c] * b[c];
        }
        b[r] = v / m[r * s + r];
    }
}

/// `c += α · aᵀ · b` on column-major views, for the small products of the linearisations: no
/// allocation (nalgebra's `gemm` packs large operands in fresh buffers).
pub(crate) fn add_transposed_product(c: &mut DMatrixViewMut<'_, f64>, alpha: f64, a: &DMatrixView<'_, f64>, b: &DMatrixView<'_, f64>) {
    debug_assert!(a.nrows() == b.nrows() && c.nrows() == a.ncols() && c.ncols() == b.ncols());
    for j in 0..b.ncols() {
        for i in 0..a.ncols() {
            c[(i, j)] += alpha * a.column(i).dot(&b.column(j));
        }
    }
}

/// A column-major matrix in a slice with leading dimension `.1`: entry `(i, j)` at `i + j·ld`.
#[derive(Clone, Copy)]
pub(crate) struct ColMajor<'a>(pub &'a [f64], pub usize);
/// [`ColMajor`], writable.
pub(crate) struct ColMajorMut<'a>(pub &'a mut [f64], pub usize);

/// `c += a · b` for column-major slices: `a` (m × k), `b` (k × nc), `c` (m × nc). Blocks of
/// `c` of 4 × 4 (16 multiply–adds per 8 loads), and at the edges of up to 3 rows or of one
/// column, are accumulated in registers over `k` and then added to `c`. No allocation
/// (nalgebra's `gemm` packs into a fresh heap buffer on every call).
pub(crate) fn gemm_nn(m: usize, nc: usize, k: usize, a: ColMajor<'_>, b: ColMajor<'_>, mut c: ColMajorMut<'_>) {
    let n4 = nc / 4 * 4;
    for j in (0..n4).step_by(4) {
        add_columns::<4>(m, j, k, a, b, &mut c);
    }
    for j in n4..nc {
        add_columns::<1>(m, j, k, a, b, &mut c);
    }
}

/// `c[.., j..j+T] += a · b[:, j..j+T]` in blocks of 4 rows, then one of the 1–3 rows left.
fn add_columns<const T: usize>(m: usize, j: usize, k: usize, a: ColMajor<'_>, b: ColMajor<'_>, c: &mut ColMajorMut<'_>) {
    let m4 = m / 4 * 4;
    for i in (0..m4).step_by(4) {
        add_block::<4, T>(i, j, k, a, b, c);
    }
    match m - m4 {
        1 => add_block::<1, T>(m4, j, k, a, b, c),
        2 => add_block::<2, T>(m4, j, k, a, b, c),
        3 => add_block::<3, T>(m4, j, k, a, b, c),
        _ => {}
    }
}

/// `c[i..i+R, j..j+T] += a[i..i+R, :] · b[:, j..j+T]`, the `R × T` sums kept in registers.
#[inline(always)]
fn add_block<const R: usize, const T: usize>(
    i: usize,
    j: usize,
    k: usize,
    ColMajor(a, lda): ColMajor<'_>,
    ColMajor(b, ldb): ColMajor<'_>,
    c: &mut ColMajorMut<'_>,
) {
    let mut acc = [[0.0_f64; R]; T];
    for l in 0..k {
        let ar: [f64; R] = a[l * lda + i..l * lda + i + R].try_into().expect("R rows");
        for (t, acc_t) in acc.iter_mut().enumerate() {
            let bt = b[(j + t) * ldb + l];
            for r in 0..R {
                acc_t[r] += ar[r] * bt;
            }
        }
    }
    let ColMajorMut(c, ldc) = c;
    for (t, acc_t) in acc.iter().enumerate() {
        for (cr, v) in c[(j + t) * *ldc + i..(j + t) * *ldc + i + R].iter_mut().zip(acc_t) {
            *cr += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_random_system() {
        let n = 7;
        let a = DMatrix::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0 + if i == j { 0.5 } else { 0.0 });
        let x = nalgebra::DVector::from_fn(n, |i, _| i as f64 - 2.0);
        let mut b = (&a * &x).as_slice().to_vec();
        let mut lu = a.clone();
        let mut piv = vec![0; n];
        assert!(lu_factor(&mut lu, &mut piv));
        lu_solve(&lu, &piv, &mut b);
        for (got, want) in b.iter().zip(x.iter()) {
            assert!((got - want).abs() < 1e-12);
        }
        // the transposed solve: Aᵀ x = b
        let mut bt = (a.transpose() * &x).as_slice().to_vec();
        lu_solve_transposed(&lu, &piv, &mut bt);
        for (got, want) in bt.iter().zip(x.iter()) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
        let mut singular = DMatrix::from_element(3, 3, 1.0);
        assert!(!lu_factor(&mut singular, &mut [0; 3]));
    }

    /// The small products against nalgebra's own, on views of larger matrices.
    #[test]
    fn products_match_nalgebra() {
        let a = DMatrix::from_fn(5, 4, |i, j| (i as f64) - 0.5 * (j as f64) + 0.25);
        let b = DMatrix::from_fn(6, 7, |i, j| ((i * 7 + j) as f64).sin());
        let mut c = DMatrix::from_fn(5, 7, |i, j| (i + j) as f64);
        // gemm_nn on a block of c: c[0..3, 1..6] += a[1..4, 0..4] · b[2..6, 0..5]
        let expected = c.view((0, 1), (3, 5)) + a.view((1, 0), (3, 4)) * b.view((2, 0), (4, 5));
        let (lda, ldb, ldc) = (a.nrows(), b.nrows(), c.nrows());
        gemm_nn(3, 5, 4, ColMajor(&a.as_slice()[1..], lda), ColMajor(&b.as_slice()[2..], ldb), ColMajorMut(&mut c.as_mut_slice()[ldc..], ldc));
        assert!((c.view((0, 1), (3, 5)) - &expected).amax() < 1e-14);
        // every edge of the 4 × 4 blocks: rows and columns 1 … 9, on views with offsets
        let big = |r: usize, c: usize, f: f64| DMatrix::from_fn(r, c, |i, j| ((i * 3 + j * 5) as f64 * f).cos());
        for (m, nc, k) in (1..=9).flat_map(|m| (1..=9).flat_map(move |nc| [1, 4, 7].map(|k| (m, nc, k)))) {
            let (a, b, mut c) = (big(m + 2, k, 0.7), big(k + 1, nc + 1, 1.3), big(m + 1, nc + 2, 0.4));
            let expected = c.view((1, 2), (m, nc)) + a.view((2, 0), (m, k)) * b.view((1, 1), (k, nc));
            let (lda, ldb, ldc) = (a.nrows(), b.nrows(), c.nrows());
            gemm_nn(
                m,
                nc,
                k,
                ColMajor(&a.as_slice()[2..], lda),
                ColMajor(&b.as_slice()[ldb + 1..], ldb),
                ColMajorMut(&mut c.as_mut_slice()[2 * ldc + 1..], ldc),
            );
            assert!((c.view((1, 2), (m, nc)) - &expected).amax() < 1e-13, "{m} × {nc} by {k}");
        }
        let expected = c.view((1, 2), (2, 4)) - a.view((0, 0), (4, 2)).transpose() * b.view((0, 1), (4, 4));
        add_transposed_product(&mut c.view_mut((1, 2), (2, 4)), -1.0, &a.view((0, 0), (4, 2)), &b.view((0, 1), (4, 4)));
        assert!((c.view((1, 2), (2, 4)) - &expected).amax() < 1e-14);
    }
}
