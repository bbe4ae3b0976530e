//! Column-major dense kernels for the backward pass's per-stage blocks.
//!
//! The blocks of an iLQR stage are small (the cart-pole's are 4×4, 4×2 and 2×2), and at those
//! sizes nalgebra's dynamic-size `gemm`/`gemv` spend most of their instructions on per-call
//! and per-column bookkeeping (strides, views, one `axpy` call per column): the backward step
//! took ≈ 8.0 k instructions per stage at nx = 4, nu = 2 with them, 6.6 k with these kernels
//! (BENCHMARKS.md, session 10). Every kernel here reads and writes plain column-major slices
//! with the dimensions passed in. Products whose three dimensions all exceed [`SMALL`] still
//! go to nalgebra's `gemm`, and through it to matrixmultiply's packed SIMD kernels, which win
//! there: the panda's backward passes (nx = 18, nu = 9) take 145 M instructions that way and
//! 244 M with the loops of this module throughout (137 M before these kernels, with fewer but
//! larger products).

use nalgebra::{DMatrix, DMatrixView, DMatrixViewMut, Dyn};

/// Products with every dimension above this go to nalgebra's `gemm` (nalgebra's own threshold
/// for handing a product to matrixmultiply).
pub(crate) const SMALL: usize = 5;

fn large(m: usize, r: usize, n: usize) -> bool {
    m > SMALL && r > SMALL && n > SMALL
}

/// `aᵀ` for `a` (r×m) column-major, as an m×r view (row stride `r`, column stride 1).
fn transposed_view(a: &[f64], r: usize, m: usize) -> DMatrixView<'_, f64, Dyn, Dyn> {
    DMatrixView::from_slice_with_strides_generic(a, Dyn(m), Dyn(r), Dyn(r), Dyn(1))
}

/// `Σ_i a_i b_i`, with four partial sums (independent chains, which the compiler keeps in
/// vector registers).
#[inline]
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut s = [0.0; 4];
    for (x, y) in ca.zip(cb) {
        for l in 0..4 {
            s[l] += x[l] * y[l];
        }
    }
    let mut tail = 0.0;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    (s[0] + s[1]) + (s[2] + s[3]) + tail
}

/// `c += α aᵀ b` for `a` (r×m), `b` (r×n) and `c` (m×n), all column-major with `r` rows in
/// `a` and `b`: one dot product of two contiguous columns per entry. `b` may be a vector
/// (`n = 1`), which makes this `c += α aᵀ b` on a vector `c`.
pub(crate) fn add_transposed_product(alpha: f64, a: &[f64], b: &[f64], r: usize, c: &mut [f64]) {
    if r == 0 {
        return;
    }
    let (m, n) = (a.len() / r, b.len() / r);
    if large(m, r, n) {
        DMatrixViewMut::from_slice(c, m, n).gemm(alpha, &transposed_view(a, r, m), &DMatrixView::from_slice(b, r, n), 1.0);
        return;
    }
    for (bj, cj) in b.chunks_exact(r).zip(c.chunks_exact_mut(m)) {
        for (ai, cij) in a.chunks_exact(r).zip(cj.iter_mut()) {
            *cij += alpha * dot(ai, bj);
        }
    }
}

/// `c += aᵀ b` for a product known to be symmetric (`b = S a` with `S` symmetric; `m = n`),
/// leaving `c` exactly symmetric when it was: for small blocks each entry below the diagonal
/// is computed once and mirrored (half the work); large ones take `gemm` and then the mean of
/// each entry and its mirror image.
pub(crate) fn add_symmetric_transposed_product(a: &[f64], b: &[f64], r: usize, c: &mut [f64]) {
    if r == 0 {
        return;
    }
    let m = a.len() / r;
    if large(m, r, m) {
        DMatrixViewMut::from_slice(c, m, m).gemm(1.0, &transposed_view(a, r, m), &DMatrixView::from_slice(b, r, m), 1.0);
        for j in 0..m {
            for i in j + 1..m {
                let v = 0.5 * (c[j * m + i] + c[i * m + j]);
                c[j * m + i] = v;
                c[i * m + j] = v;
            }
        }
        return;
    }
    for j in 0..m {
        let bj = &b[j * r..(j + 1) * r];
        for i in j..m {
            let v = dot(&a[i * r..(i + 1) * r], bj);
            c[j * m + i] += v;
            if i != j {
                c[i * m + j] += v;
            }
        }
    }
}

/// `c = a b` for `a` (m×r), `b` (r×n) and `c` (m×n), column-major: column by column as
/// `c_j = Σ_k b_kj a_k` for small blocks, nalgebra's `gemm` for large ones.
pub(crate) fn set_product(a: &[f64], m: usize, b: &[f64], r: usize, c: &mut [f64]) {
    if m == 0 || r == 0 {
        c.fill(0.0);
        return;
    }
    let n = b.len() / r;
    if large(m, r, n) {
        let mut cv = DMatrixViewMut::from_slice(c, m, n);
        cv.gemm(1.0, &DMatrixView::from_slice(a, m, r), &DMatrixView::from_slice(b, r, n), 0.0);
        return;
    }
    for (bj, cj) in b.chunks_exact(r).zip(c.chunks_exact_mut(m)) {
        cj.fill(0.0);
        for (ak, &bkj) in a.chunks_exact(m).zip(bj) {
            for (ci, &aik) in cj.iter_mut().zip(ak) {
                *ci += aik * bkj;
            }
        }
    }
}

/// `p ← (p + pᵀ)/2`, in place.
pub(crate) fn symmetrise(p: &mut DMatrix<f64>) {
    let n = p.nrows();
    for i in 0..n {
        for j in 0..i {
            let s = 0.5 * (p[(i, j)] + p[(j, i)]);
            p[(i, j)] = s;
            p[(j, i)] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DMatrix;

    fn random(m: usize, n: usize, seed: u64) -> DMatrix<f64> {
        // a small LCG: reproducible entries in [-1, 1)
        let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        DMatrix::from_fn(m, n, |_, _| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
    }

    /// Both paths of [`set_product`] (own loops and nalgebra's `gemm`) and the transposed
    /// products agree with nalgebra's products to round-off, for square, thin and empty shapes.
    #[test]
    fn products_match_nalgebra() {
        for (m, r, n) in [(4, 4, 6), (2, 4, 4), (1, 1, 1), (9, 9, 9), (14, 14, 21), (14, 14, 7), (3, 0, 2), (20, 3, 20), (5, 11, 1)] {
            let (a, b) = (random(m, r, 1 + m as u64), random(r, n, 2 + n as u64));
            let tol = 1e-14 * (1 + r) as f64;
            let mut c = DMatrix::from_element(m, n, 7.0);
            set_product(a.as_slice(), m, b.as_slice(), r, c.as_mut_slice());
            assert!((&c - &a * &b).amax() <= tol, "a b, {m}x{r}x{n}");
            // aᵀ b with a: r×m, b: r×n
            let at = a.transpose();
            let c0 = random(m, n, 3);
            let mut c = c0.clone();
            add_transposed_product(-0.5, at.as_slice(), b.as_slice(), r, c.as_mut_slice());
            assert!((&c - (&c0 - 0.5 * &a * &b)).amax() <= tol, "aᵀ b, {m}x{r}x{n}");
            // aᵀ S a with S symmetric: exactly symmetric, and equal to the product
            let s = &a.transpose() * random(m, m, 4) * &a;
            let s = &s + s.transpose();
            let sb = &s * &b;
            let c0 = random(n, n, 5);
            let c0 = &c0 + c0.transpose();
            let mut c = c0.clone();
            add_symmetric_transposed_product(b.as_slice(), sb.as_slice(), r, c.as_mut_slice());
            assert_eq!(c, c.transpose(), "symmetric, {m}x{r}x{n}");
            let scale = 1.0 + s.amax() * b.amax() * b.amax() * (1 + r * r) as f64;
            assert!((&c - (&c0 + b.transpose() * &sb)).amax() <= tol * scale, "bᵀ S b, {m}x{r}x{n}");
        }
    }
}
