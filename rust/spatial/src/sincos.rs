//! `sin x` and `cos x` together, inlined, for the joint angles of every kinematic pass.
//!
//! glibc's `sincos` is a call per revolute joint that the compiler cannot schedule around;
//! inlined, the same values are a few dozen independent flops, and the kinematic passes take
//! all joints' values first (`vidyn_rbd`'s `joint_sin_cos`), off the chain of placements.
//! CRBA, RNEA and ABA are 4–15 % faster on the double pendulum, chain5, ur5 and solo12 for it
//! (`BENCHMARKS.md`, session 28).
//!
//! Method (Cody & Waite 1980): `x = k·π/2 + r` with `k` the nearest integer to `x·2/π` and
//! `r ∈ [−π/4, π/4]` formed with π/2 split into three parts, the first two of 33 significant
//! bits so that `k·P1` and `k·P2` are exact for `|k| < 2²⁰`; then the Taylor series of `sin r`
//! to `r¹⁷` and of `cos r` to `r¹⁶`, whose first omitted terms are below 2⁻⁶² relative on that
//! interval; `k mod 4` picks and signs the pair. The reduced argument is kept to twice double
//! precision (`hi + lo`) and `lo` enters both series to first order (rounded to one double,
//! `r` made `sin r` up to 2.2 ulp wrong for `|r|` just above ½). Against glibc's `sin` and
//! `cos`, themselves within about half an ulp: at most 1.0 ulp apart on the test's 4·10⁵
//! arguments. Beyond `|x| = 10⁵`, and for non-finite `x`, it calls libm. Plain multiply–add
//! (no `mul_add`), so portable and native builds give the same bits.

/// The three parts of π/2 (`P1 + P2 + P3` = π/2 to about 120 bits).
const PIO2_1: f64 = 1.570_796_326_734_125_6;
const PIO2_2: f64 = 6.077_100_506_303_966e-11;
const PIO2_3: f64 = 2.022_266_248_795_950_6e-21;
/// Adding then subtracting `1.5·2⁵²` rounds to the nearest integer (ties to even) without
/// SSE4.1's `roundsd`, which the portable target lacks; the integer sits in the low bits.
const ROUND: f64 = 6_755_399_441_055_744.0;
/// Above this the fast path's reduction is not trusted (`|k|` must stay well below 2²⁰).
const FAST_LIMIT: f64 = 1e5;

/// `(sin x, cos x)`. Always inlined (LLVM kept it as a call in the kinematic passes).
#[inline(always)]
#[must_use]
pub fn sin_cos(x: f64) -> (f64, f64) {
    if x.is_nan() || x.abs() > FAST_LIMIT || x == 0.0 {
        return outside(x);
    }
    let (s, c, quadrant) = reduced(x);
    // quadrant q: (sin, cos) = (s, c), (c, −s), (−s, −c), (−c, s)
    let (a, b) = if quadrant & 1 == 0 { (s, c) } else { (c, s) };
    (f64::from_bits(a.to_bits() ^ sin_sign(quadrant)), f64::from_bits(b.to_bits() ^ cos_sign(quadrant)))
}

/// The arguments the reduction does not take: beyond its range or not finite (libm), and
/// ±0 (exact, keeping the sign of the zero).
#[cold]
fn outside(x: f64) -> (f64, f64) {
    if x == 0.0 {
        (x, 1.0)
    } else {
        x.sin_cos()
    }
}

/// The sign bits to flip: `sin` in quadrants 2 and 3, `cos` in quadrants 1 and 2.
#[inline(always)]
fn sin_sign(quadrant: u64) -> u64 {
    (quadrant & 2) << 62
}

#[inline(always)]
fn cos_sign(quadrant: u64) -> u64 {
    (quadrant.wrapping_add(1) & 2) << 62
}

/// `(sin r, cos r, k)` with `x = k·π/2 + r`, `|r| ≤ π/4`; `k` in the low bits of the
/// returned word (two's complement).
#[inline(always)]
fn reduced(x: f64) -> (f64, f64, u64) {
    let shifted = x * std::f64::consts::FRAC_2_PI + ROUND;
    let k = shifted - ROUND;
    let (hi, lo) = reduce(x, k);
    let z = hi * hi;
    let half = 0.5 * z;
    let s = hi + (lo * (1.0 - half) + hi * z * sin_tail(z));
    let w = 1.0 - half;
    // `1 − z/2` rounded drops the low bits of `z/2`: added back (`(1 − w) − z/2` is exact)
    let c = w + ((((1.0 - w) - half) + z * z * cos_tail(z)) - hi * lo);
    (s, c, shifted.to_bits())
}

/// `x − k·π/2` as an unevaluated sum `hi + lo`: `x − k P1` is exact, the other two parts are
/// subtracted with their rounding errors carried in `lo` (for `|r|` just above ½ an error of
/// one ulp of `r` is two of `sin r`).
#[inline(always)]
fn reduce(x: f64, k: f64) -> (f64, f64) {
    let (r1, t2) = (x - k * PIO2_1, k * PIO2_2);
    // two-sum of r1 and −t2
    let r2 = r1 - t2;
    let back = r2 - r1;
    let e2 = (r1 - (r2 - back)) + (-t2 - back);
    let t3 = k * PIO2_3;
    let hi = r2 - t3;
    (hi, ((r2 - hi) - t3) + e2)
}

/// `(sin r − r)/(r z)` for `|r| ≤ π/4`, `z = r²`: `−1/3! + z/5! − …` to the `r¹⁷/17!` term,
/// summed in pairs (Estrin's scheme: three dependent multiply–adds instead of Horner's seven).
#[inline(always)]
fn sin_tail(z: f64) -> f64 {
    let (z2, z4) = (z * z, (z * z) * (z * z));
    let low = (-1.0 / 6.0 + z * (1.0 / 120.0)) + z2 * (-1.0 / 5040.0 + z * (1.0 / 362_880.0));
    let high = (-1.0 / 39_916_800.0 + z * (1.0 / 6_227_020_800.0)) + z2 * (-1.0 / 1_307_674_368_000.0 + z * (1.0 / 355_687_428_096_000.0));
    low + z4 * high
}

/// `(cos r − 1 + z/2)/z²` for `|r| ≤ π/4`, `z = r²`: `1/4! − z/6! + …` to the `r¹⁶/16!` term,
/// summed in pairs as [`sin_tail`].
#[inline(always)]
fn cos_tail(z: f64) -> f64 {
    let (z2, z4) = (z * z, (z * z) * (z * z));
    let low = (1.0 / 24.0 + z * (-1.0 / 720.0)) + z2 * (1.0 / 40_320.0 + z * (-1.0 / 3_628_800.0));
    let high = (1.0 / 479_001_600.0 + z * (-1.0 / 87_178_291_200.0)) + z2 * (1.0 / 20_922_789_888_000.0);
    low + z4 * high
}

#[cfg(test)]
mod tests {
    use super::sin_cos;

    /// Distance in units in the last place of `want`: `ε·2^e` with `2^e ≤ |want| < 2^(e+1)`
    /// (at least the smallest normal's ulp).
    fn ulps(got: f64, want: f64) -> f64 {
        let binade = f64::from_bits(want.abs().to_bits() & 0x7ff0_0000_0000_0000);
        (got - want).abs() / (f64::EPSILON * binade).max(f64::MIN_POSITIVE)
    }

    fn worst_against_libm(xs: impl Iterator<Item = f64>) -> f64 {
        xs.map(|x| {
            let ((s, c), (ls, lc)) = (sin_cos(x), x.sin_cos());
            ulps(s, ls).max(ulps(c, lc))
        })
        .fold(0.0, f64::max)
    }

    /// Against libm, itself within about half an ulp of the exact values: at most one ulp
    /// apart (the reduced argument rounded to one double instead of `hi + lo` gives 2, the
    /// third part of π/2 left out 13).
    #[test]
    fn within_one_ulp_of_libm_where_joints_live() {
        // a fixed linear congruential sequence: uniform angles in [−4π, 4π] and [−1e5, 1e5]
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut uniform = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        let small: Vec<f64> = (0..200_000).map(|_| 4.0 * std::f64::consts::PI * uniform()).collect();
        let large: Vec<f64> = (0..200_000).map(|_| 1e5 * uniform()).collect();
        // the reduction's hard cases: next to multiples of π/2 (tiny reduced arguments), next
        // to the quadrant boundaries ±π/4 + kπ/2, and reduced arguments just above ½ far out
        // (where `sin r` has half the ulp of `r`, so the reduction's rounding counts double)
        let near: Vec<f64> = (-2000i32..2000)
            .flat_map(|k| {
                let m = f64::from(k) * std::f64::consts::FRAC_PI_2;
                let b = m + std::f64::consts::FRAC_PI_4;
                [m, m + 1e-9, m - 1e-12, b, b + 1e-15, b - 1e-15]
            })
            .chain((0..40_000).map(|i| f64::from(i) * std::f64::consts::FRAC_PI_2 + 0.5 + f64::from(i % 97) * 2.4e-4))
            .collect();
        for (name, xs) in [("small", small), ("large", large), ("near", near)] {
            let worst = worst_against_libm(xs.into_iter());
            assert!(worst <= 1.0, "{name}: {worst} ulp");
        }
    }

    #[test]
    fn exact_at_zero_and_tiny_and_falls_back_beyond_the_fast_range() {
        assert_eq!(sin_cos(0.0), (0.0, 1.0));
        let (s, c) = sin_cos(-0.0);
        assert!(s == 0.0 && s.is_sign_negative() && c == 1.0);
        assert_eq!(sin_cos(1e-300), (1e-300, 1.0));
        for x in [1e5 + 1.0, -3e7, 1e300, f64::MAX] {
            assert_eq!(sin_cos(x), x.sin_cos());
        }
        let (s, c) = sin_cos(f64::NAN);
        assert!(s.is_nan() && c.is_nan());
        let (s, c) = sin_cos(f64::INFINITY);
        assert!(s.is_nan() && c.is_nan());
    }
}
