//! Graph-based sparse block LDU solver for the Newton systems of the integrator
//! (Brüdigam & Manchester 2020, Algs. 3–4; Brüdigam et al. 2023, §4, Algs. 1–4).
//!
//! The Newton matrix `F` has one block row/column per *node* (a body, dimension 6, or a joint,
//! dimension = its constraint rows) and a nonzero block `F_ij` only where nodes `i`, `j` are
//! adjacent in the mechanism graph (a joint and a body it constrains). `F` is not symmetric,
//! but its block pattern is, so it is factorised as `F = L D U` by block Gaussian elimination
//! without pivoting between blocks:
//! $$\text{for } k \text{ in order: } L_{ik} = F_{ik} F_{kk}^{-1},\quad F_{ij} \mathrel{-}= L_{ik} F_{kj}\quad (i, j \in N(k))$$
//! over the not-yet-eliminated neighbours `N(k)` of `k`; the solve is the forward sweep
//! `b_i −= L_ik b_k` in elimination order and the backward sweep
//! `x_k = F_kk⁻¹ (b_k − Σ_{j ∈ N(k)} F_kj x_j)` in reverse (the papers' back-substitution with
//! the corrected index `F[i, parent(i)]`, see the digest §6).
//!
//! **Ordering** ([`elimination_order`]). Bodies and joints form a graph; a spanning forest is
//! grown from the world (then from the first body of each floating component), and every joint
//! outside it is a loop closure. The order is the post-order of that forest — each body after
//! the subtrees hanging from it, each tree joint right after the body it carries — so every
//! joint is pivoted after a body whose six free directions it can use, and on a tree every
//! eliminated node has one remaining neighbour: no fill, O(n). A loop joint is placed right
//! before the lowest common ancestor body of its two bodies (last when that is the world); it
//! fills in only along its cycle; contacts between bodies are ordered the same way
//! ([`elimination_order_with_loops`]). The fill blocks are found symbolically when the solver is
//! built, so the numeric phase never allocates. (The papers append all loop joints as one
//! dense node, 2020, or classify cyclic children, 2023 Alg. 3; this symbolic elimination gives
//! the same fill as the latter and reduces to their Alg. 1 on trees.)
//!
//! **Pivots.** Each pivot block is inverted by LU; a pivot whose ∞-norm condition number
//! exceeds [`PIVOT_CONDITION_LIMIT`] (or that is exactly singular) stops the factorisation with
//! the node's index: no silent regularisation.
//!
//! Blocks are stored as 6×6 matrices; a node of dimension `m < 6` uses the leading `m` rows /
//! columns, the padding of its pivot is a multiple of the identity and all other padding is
//! zero, so the fixed-size arithmetic never mixes padded and real entries.

use nalgebra::{Matrix6, Vector6};
use std::collections::{BTreeSet, HashMap};

/// Largest accepted ∞-norm condition number of a pivot block.
pub const PIVOT_CONDITION_LIMIT: f64 = 1e14;

#[derive(Clone, Debug)]
struct Step {
    node: usize,
    /// `(i, block of F_ik, block of F_ki)` for the remaining neighbours `i`.
    neighbours: Vec<(usize, usize, usize)>,
    /// `(target block F_ij, block F_ik (holding L_ik), block F_kj)` for `i, j ∈ N(k)`.
    updates: Vec<(usize, usize, usize)>,
}

/// `a⁻¹` by Gauss–Jordan elimination with partial pivoting on the rows of `[a | 1]`; `None`
/// when a pivot column is exactly zero (a NaN entry gives a NaN inverse, which the condition
/// check of [`GraphSolver::factorize`] refuses). Fixed-size loops over stack arrays: nalgebra's
/// general LU inverse took half of a factorisation on a 32-link chain.
#[inline(always)]
fn inverse6(a: &Matrix6<f64>) -> Option<Matrix6<f64>> {
    let mut m = [[0.0; 12]; 6];
    for (i, row) in m.iter_mut().enumerate() {
        for j in 0..6 {
            row[j] = a[(i, j)];
        }
        row[6 + i] = 1.0;
    }
    for c in 0..6 {
        let p = (c..6).fold(c, |p, r| if m[r][c].abs() > m[p][c].abs() { r } else { p });
        if m[p][c] == 0.0 {
            return None;
        }
        m.swap(c, p);
        let pivot = m[c];
        let inv = 1.0 / pivot[c];
        let scaled: [f64; 12] = std::array::from_fn(|j| pivot[j] * inv);
        for (r, row) in m.iter_mut().enumerate() {
            if r != c {
                let f = row[c];
                for (x, y) in row.iter_mut().zip(&scaled) {
                    *x -= f * y;
                }
            }
        }
        m[c] = scaled;
    }
    Some(Matrix6::from_fn(|i, j| m[i][6 + j]))
}

/// A block-sparse matrix with a fixed pattern and its in-place LDU factorisation.
#[derive(Clone, Debug)]
pub struct GraphSolver {
    dims: Vec<usize>,
    /// Blocks `0..n` are the diagonal `F_kk`, the others the off-diagonal `F_ij` (both
    /// directions of every edge, including fill).
    blocks: Vec<Matrix6<f64>>,
    /// `(i, j, block)` for every structurally nonzero off-diagonal block `F_ij` of the
    /// original pattern and the fill, sorted: the order in which [`Self::mul_vec`] sums them
    /// (the same for every solver of the same pattern), and by rows for the lookups.
    off_diagonal: Vec<(usize, usize, usize)>,
    /// Row `i`'s entries are `off_diagonal[row_start[i]..row_start[i + 1]]` (a node has a
    /// few neighbours: a scan of them is cheaper than hashing the pair in every assembly).
    row_start: Vec<usize>,
    steps: Vec<Step>,
    dinv: Vec<Matrix6<f64>>,
    fill: usize,
}

impl GraphSolver {
    /// Builds the solver for `dims.len()` nodes of the given dimensions (each 1..=6), the
    /// undirected `edges` (no duplicates, no self loops) and an elimination `order` (a
    /// permutation of the nodes, e.g. from [`elimination_order`]).
    pub fn new(dims: &[usize], edges: &[(usize, usize)], order: &[usize]) -> Result<Self, String> {
        let n = dims.len();
        if dims.iter().any(|&d| d == 0 || d > 6) {
            return Err("every node needs a dimension in 1..=6".into());
        }
        let mut seen = vec![false; n];
        if order.len() != n || order.iter().any(|&k| k >= n || std::mem::replace(&mut seen[k], true)) {
            return Err("the elimination order must be a permutation of the nodes".into());
        }
        let mut adj: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
        let mut index = HashMap::new();
        let mut nblocks = n;
        let mut add = |i: usize, j: usize, index: &mut HashMap<(usize, usize), usize>| {
            index.insert((i, j), nblocks);
            index.insert((j, i), nblocks + 1);
            nblocks += 2;
        };
        for &(i, j) in edges {
            if i >= n || j >= n || i == j || adj[i].contains(&j) {
                return Err(format!("bad or duplicate edge ({i}, {j})"));
            }
            adj[i].insert(j);
            adj[j].insert(i);
            add(i, j, &mut index);
        }
        let mut steps = Vec::with_capacity(n);
        let mut fill = 0;
        for &k in order {
            let nbrs: Vec<usize> = adj[k].iter().copied().collect();
            for (a, &i) in nbrs.iter().enumerate() {
                for &j in &nbrs[a + 1..] {
                    if !adj[i].contains(&j) {
                        adj[i].insert(j);
                        adj[j].insert(i);
                        add(i, j, &mut index);
                        fill += 1;
                    }
                }
            }
            let mut step = Step { node: k, neighbours: Vec::with_capacity(nbrs.len()), updates: Vec::with_capacity(nbrs.len() * nbrs.len()) };
            for &i in &nbrs {
                step.neighbours.push((i, index[&(i, k)], index[&(k, i)]));
                adj[i].remove(&k);
            }
            for &i in &nbrs {
                for &j in &nbrs {
                    let target = if i == j { i } else { index[&(i, j)] };
                    step.updates.push((target, index[&(i, k)], index[&(k, j)]));
                }
            }
            adj[k].clear();
            steps.push(step);
        }
        let mut off_diagonal: Vec<(usize, usize, usize)> = index.iter().map(|(&(i, j), &b)| (i, j, b)).collect();
        off_diagonal.sort_unstable();
        let row_start = (0..=n).map(|i| off_diagonal.partition_point(|&(r, _, _)| r < i)).collect();
        Ok(Self { dims: dims.to_vec(), blocks: vec![Matrix6::zeros(); nblocks], off_diagonal, row_start, steps, dinv: vec![Matrix6::zeros(); n], fill })
    }

    /// Number of nodes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.dims.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.dims.is_empty()
    }

    /// Dimension of node `k`.
    #[must_use]
    pub fn dim(&self, k: usize) -> usize {
        self.dims[k]
    }

    /// Number of fill edges created by the elimination order (zero on trees).
    #[must_use]
    pub fn fill_edges(&self) -> usize {
        self.fill
    }

    /// The elimination order.
    pub fn order(&self) -> impl Iterator<Item = usize> + '_ {
        self.steps.iter().map(|s| s.node)
    }

    /// Zeroes every block (before assembling new values).
    pub fn clear(&mut self) {
        for b in &mut self.blocks {
            b.fill(0.0);
        }
    }

    /// Diagonal block `F_kk` (leading `dim(k)` rows and columns used).
    #[inline]
    pub fn diagonal_mut(&mut self, k: usize) -> &mut Matrix6<f64> {
        &mut self.blocks[k]
    }

    /// Off-diagonal block `F_ij`; `None` when `(i, j)` is not in the pattern.
    #[inline]
    pub fn block_mut(&mut self, i: usize, j: usize) -> Option<&mut Matrix6<f64>> {
        let b = self.block_index(i, j)?;
        Some(&mut self.blocks[b])
    }

    /// Index of the off-diagonal block `F_ij` for [`Self::block_at_mut`].
    #[must_use]
    #[inline]
    pub fn block_index(&self, i: usize, j: usize) -> Option<usize> {
        let row = self.off_diagonal.get(*self.row_start.get(i)?..self.row_start[i + 1])?;
        row.iter().find(|&&(_, c, _)| c == j).map(|&(_, _, b)| b)
    }

    #[inline]
    pub fn block_at_mut(&mut self, b: usize) -> &mut Matrix6<f64> {
        &mut self.blocks[b]
    }

    /// In-place `F = L D U`. On a singular (or numerically singular) pivot returns the node.
    /// On a CPU with AVX2 (detected at run time, so the portable build uses it) the same code
    /// is compiled for 256-bit vectors: the same operations in the same order, the same bits
    /// (`tests::avx2_code_gives_the_baseline_bits`), a quarter fewer instructions on a 32-link
    /// chain's Newton matrix (2–5 % of a rollout step's time at 32–256 links: the elimination
    /// is latency-bound).
    pub fn factorize(&mut self) -> Result<(), usize> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above
            return unsafe { self.factorize_avx2() };
        }
        self.factorize_here()
    }

    /// [`Self::factorize_here`] compiled for AVX2.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn factorize_avx2(&mut self) -> Result<(), usize> {
        self.factorize_here()
    }

    /// The elimination of [`Self::factorize`], inlined into each build of it.
    #[inline(always)]
    fn factorize_here(&mut self) -> Result<(), usize> {
        for s in &self.steps {
            let k = s.node;
            let m = self.dims[k];
            let d = &mut self.blocks[k];
            let scale = d.view((0, 0), (m, m)).amax().max(f64::MIN_POSITIVE);
            for i in m..6 {
                d[(i, i)] = scale;
            }
            let inv = inverse6(d).ok_or(k)?;
            let cond = d.view((0, 0), (m, m)).row_iter().map(|r| r.lp_norm(1)).fold(0.0, f64::max)
                * inv.view((0, 0), (m, m)).row_iter().map(|r| r.lp_norm(1)).fold(0.0, f64::max);
            if cond.is_nan() || cond > PIVOT_CONDITION_LIMIT {
                return Err(k);
            }
            self.dinv[k] = inv;
            for &(_, ik, _) in &s.neighbours {
                self.blocks[ik] *= inv;
            }
            for &(t, ik, kj) in &s.updates {
                let delta = self.blocks[ik] * self.blocks[kj];
                self.blocks[t] -= delta;
            }
        }
        Ok(())
    }

    /// Solves `F x = b` in place with the factors of [`Self::factorize`]; `b[k]` holds node
    /// `k`'s entries in its leading `dim(k)` components (the rest must be zero). Compiled for
    /// AVX2 where the CPU has it, as [`Self::factorize`].
    pub fn solve(&self, b: &mut [Vector6<f64>]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above
            unsafe { self.solve_avx2(b) };
            return;
        }
        self.solve_here(b);
    }

    /// [`Self::solve_here`] compiled for AVX2.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn solve_avx2(&self, b: &mut [Vector6<f64>]) {
        self.solve_here(b);
    }

    /// The substitutions of [`Self::solve`], inlined into each build of it.
    #[inline(always)]
    fn solve_here(&self, b: &mut [Vector6<f64>]) {
        for s in &self.steps {
            let bk = b[s.node];
            for &(i, ik, _) in &s.neighbours {
                b[i] -= self.blocks[ik] * bk;
            }
        }
        for s in self.steps.iter().rev() {
            let mut y = b[s.node];
            for &(j, _, kj) in &s.neighbours {
                y -= self.blocks[kj] * b[j];
            }
            b[s.node] = self.dinv[s.node] * y;
        }
    }

    /// `y = F x` with the blocks as they are (call on an unfactorised copy, e.g. for iterative
    /// refinement of solves with ill-conditioned pivots). Entries in the node layout of
    /// [`Self::solve`].
    pub fn mul_vec(&self, x: &[Vector6<f64>], y: &mut [Vector6<f64>]) {
        for k in 0..self.len() {
            y[k] = self.blocks[k] * x[k];
        }
        for &(i, j, b) in &self.off_diagonal {
            y[i] += self.blocks[b] * x[j];
        }
        for (k, yk) in y.iter_mut().enumerate() {
            for i in self.dims[k]..6 {
                yk[i] = 0.0;
            }
        }
    }

    /// The assembled matrix as a dense `N × N` matrix (`N = Σ dims`), rows and columns in node
    /// order — for tests and the dense baseline of the benchmarks. Call before `factorize`.
    #[cfg(any(test, feature = "oracles"))]
    #[must_use]
    pub fn to_dense(&self) -> nalgebra::DMatrix<f64> {
        let offsets = self.offsets();
        let total = offsets[self.len()];
        let mut a = nalgebra::DMatrix::zeros(total, total);
        for k in 0..self.len() {
            let m = self.dims[k];
            a.view_mut((offsets[k], offsets[k]), (m, m)).copy_from(&self.blocks[k].view((0, 0), (m, m)));
        }
        for &(i, j, b) in &self.off_diagonal {
            let (mi, mj) = (self.dims[i], self.dims[j]);
            a.view_mut((offsets[i], offsets[j]), (mi, mj)).copy_from(&self.blocks[b].view((0, 0), (mi, mj)));
        }
        a
    }

    /// Start of each node's rows in the dense layout (`len() + 1` entries).
    #[must_use]
    pub fn offsets(&self) -> Vec<usize> {
        let mut o = vec![0; self.len() + 1];
        for k in 0..self.len() {
            o[k + 1] = o[k] + self.dims[k];
        }
        o
    }
}

/// The elimination order of a mechanism graph with `nb` bodies (nodes `0..nb`) and joints
/// (nodes `nb..nb + joints.len()`), joint `j` connecting `joints[j].0` (a body, or the world for
/// `None`) to body `joints[j].1`. Returns the order (see the module docs) and, per joint,
/// whether it closes a loop (is outside the spanning forest). O(n + loops·depth).
#[must_use]
pub fn elimination_order(nb: usize, joints: &[(Option<usize>, usize)]) -> (Vec<usize>, Vec<bool>) {
    elimination_order_with_loops(nb, joints, &[])
}

/// [`elimination_order`] with further nodes `nb + joints.len() + k` that join the bodies
/// `loops[k]` and are always treated as loop closures (never part of the spanning forest):
/// each is placed right before the lowest common ancestor of its bodies, or last when they lie
/// in different trees. Contacts between bodies are such nodes: their pivots (the barrier's
/// `μ`-small slacks) must not be eliminated before a body of theirs, as a joint's zero pivot.
#[must_use]
pub fn elimination_order_with_loops(nb: usize, joints: &[(Option<usize>, usize)], loops: &[(usize, usize)]) -> (Vec<usize>, Vec<bool>) {
    let nj = joints.len();
    // body → incident joints
    let mut incident: Vec<Vec<usize>> = vec![Vec::new(); nb];
    let mut world_joints = Vec::new();
    for (j, &(a, b)) in joints.iter().enumerate() {
        incident[b].push(j);
        match a {
            Some(a) => incident[a].push(j),
            None => world_joints.push(j),
        }
    }
    // spanning forest by depth-first search; tree_parent[b] = (joint, parent body or world)
    let mut tree_parent: Vec<Option<(usize, Option<usize>)>> = vec![None; nb];
    let mut visited = vec![false; nb];
    let mut is_loop = vec![true; nj];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nb]; // tree joints below each body
    let mut roots: Vec<(Option<usize>, usize)> = Vec::new(); // (root joint, root body)
    let mut depth = vec![0usize; nb];
    let mut stack: Vec<usize> = Vec::new();
    let grow = |start: usize,
                via: Option<usize>,
                stack: &mut Vec<usize>,
                visited: &mut Vec<bool>,
                is_loop: &mut Vec<bool>,
                tree_parent: &mut Vec<Option<(usize, Option<usize>)>>,
                children: &mut Vec<Vec<usize>>,
                depth: &mut Vec<usize>| {
        visited[start] = true;
        if let Some(j) = via {
            is_loop[j] = false;
            tree_parent[start] = Some((j, None));
        }
        stack.push(start);
        while let Some(b) = stack.pop() {
            for &j in &incident[b] {
                let (a, c) = joints[j];
                let other = if c == b { a } else { Some(c) };
                if let Some(o) = other {
                    if o != b && !visited[o] {
                        visited[o] = true;
                        is_loop[j] = false;
                        tree_parent[o] = Some((j, Some(b)));
                        children[b].push(j);
                        depth[o] = depth[b] + 1;
                        stack.push(o);
                    }
                }
            }
        }
    };
    for &j in &world_joints {
        let b = joints[j].1;
        if !visited[b] {
            roots.push((Some(j), b));
            grow(b, Some(j), &mut stack, &mut visited, &mut is_loop, &mut tree_parent, &mut children, &mut depth);
        }
    }
    for b in 0..nb {
        if !visited[b] {
            roots.push((None, b));
            grow(b, None, &mut stack, &mut visited, &mut is_loop, &mut tree_parent, &mut children, &mut depth);
        }
    }
    let root_of = |mut b: usize| {
        while let Some((_, Some(p))) = tree_parent[b] {
            b = p;
        }
        b
    };
    // loop joints (and the extra loops) placed before the lowest common ancestor body (None:
    // at the very end)
    let mut before: Vec<Vec<usize>> = vec![Vec::new(); nb];
    let mut last = Vec::new();
    let closures = (0..nj).filter(|&j| is_loop[j]).map(|j| (nb + j, joints[j])).chain(loops.iter().enumerate().map(|(k, &(a, b))| (nb + nj + k, (Some(a), b))));
    for (node, (a, b)) in closures {
        let lca = a.and_then(|a| {
            if root_of(a) != root_of(b) {
                return None;
            }
            let (mut x, mut y) = (a, b);
            while x != y {
                if depth[x] >= depth[y] {
                    x = tree_parent[x].and_then(|t| t.1)?;
                } else {
                    y = tree_parent[y].and_then(|t| t.1)?;
                }
            }
            Some(x)
        });
        match lca {
            Some(c) => before[c].push(node),
            None => last.push(node),
        }
    }
    // post-order: body after the subtrees of its tree joints, each tree joint after its body
    let mut order = Vec::with_capacity(nb + nj + loops.len());
    for &(root_joint, root) in &roots {
        // iterative post-order over bodies; (body, next child index)
        let mut st: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (b, ref mut next)) = st.last_mut() {
            if *next < children[b].len() {
                let j = children[b][*next];
                *next += 1;
                let (a, c) = joints[j];
                let child = if c == b { a.unwrap_or(c) } else { c };
                st.push((child, 0));
            } else {
                st.pop();
                order.extend(before[b].iter().copied());
                order.push(b);
                if let Some((j, Some(_))) = tree_parent[b] {
                    order.push(nb + j);
                }
            }
        }
        if let Some(j) = root_joint {
            order.push(nb + j);
        }
    }
    order.extend(last);
    (order, is_loop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DVector;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The pivot inverse against nalgebra's LU inverse on random, badly scaled and permuted
    /// matrices (a product with the matrix gives the identity), and a zero column refused.
    #[test]
    fn pivot_inverse_is_the_inverse() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for k in 0..200 {
            let mut a = Matrix6::from_fn(|_, _| rng.random_range(-1.0..1.0));
            // every other case: rows scaled over five decades and a zero leading entry
            if k % 2 == 1 {
                for i in 0..6 {
                    a.row_mut(i).scale_mut(10f64.powi(i as i32 - 3));
                }
                a[(0, 0)] = 0.0;
            }
            let inv = inverse6(&a).expect("regular");
            let reference = a.try_inverse().expect("regular");
            // residuals `a·inv − 1` and distances to the LU's inverse of the order of cond(a)·ε
            let norm = |m: &Matrix6<f64>| m.row_iter().map(|r| r.lp_norm(1)).fold(0.0, f64::max);
            let cond = norm(&a) * norm(&reference);
            let residual = |m: &Matrix6<f64>| (a * m - Matrix6::identity()).amax();
            assert!(residual(&inv) <= 16.0 * cond * f64::EPSILON, "case {k}: {} at cond {cond:e}", residual(&inv));
            assert!((inv - reference).amax() <= 16.0 * cond * f64::EPSILON * inv.amax(), "case {k}");
        }
        let mut singular = Matrix6::from_fn(|i, j| (i * 6 + j) as f64 + 1.0);
        singular.column_mut(2).fill(0.0);
        assert!(inverse6(&singular).is_none());
    }

    /// A random mechanism-like graph: `nb` bodies (dim 6) joined by tree joints (each to a
    /// random earlier body or, for the first and sometimes others, the world) plus `loops`
    /// extra joints between random body pairs; joint dims random in 1..=6.
    fn random_graph(rng: &mut ChaCha8Rng, nb: usize, loops: usize) -> (Vec<usize>, Vec<(usize, usize)>, Vec<usize>) {
        let mut dims = vec![6; nb];
        let mut zero = vec![false; nb];
        let mut edges = Vec::new();
        let joint = |a: Option<usize>, b: usize, dims: &mut Vec<usize>, zero: &mut Vec<bool>, edges: &mut Vec<(usize, usize)>, m: usize| {
            let j = dims.len();
            dims.push(m);
            zero.push(true);
            edges.push((j, b));
            if let Some(a) = a {
                edges.push((j, a));
            }
        };
        for b in 0..nb {
            let parent = if b == 0 || rng.random_range(0.0..1.0) < 0.1 { None } else { Some(rng.random_range(0..b)) };
            // at most 4 rows: every body keeps two free directions, so the loops below are
            // never redundant
            let m = rng.random_range(1..=4);
            joint(parent, b, &mut dims, &mut zero, &mut edges, m);
        }
        for _ in 0..loops {
            let a = rng.random_range(0..nb);
            let b = (a + 1 + rng.random_range(0..nb - 1)) % nb;
            joint(Some(a), b, &mut dims, &mut zero, &mut edges, rng.random_range(1..=2));
        }
        let _ = &zero;
        let mut pairs = Vec::new();
        for j in nb..dims.len() {
            let b = edges.iter().find(|e| e.0 == j).map(|e| e.1).unwrap_or(0);
            let a = edges.iter().filter(|e| e.0 == j).nth(1).map(|e| e.1);
            pairs.push((a, b));
        }
        let (order, _) = elimination_order(nb, &pairs);
        (dims, edges, order)
    }

    /// Fills the pattern with random values shaped like the integrator's Newton matrix:
    /// unsymmetric body pivots `4·1 + U(−1, 1)` (like `M/Δt` plus gyroscopic terms, scaled
    /// so that the test systems have condition numbers ~1e2–1e3), a joint–body pair `F_jb = G`, `F_bj = −Gᵀ + 0.1·P` with `G`, `P` random O(1)
    /// (constraint Jacobians at two different knots), joint diagonals zero.
    fn fill_random(rng: &mut ChaCha8Rng, s: &mut GraphSolver, edges: &[(usize, usize)], nb: usize) {
        s.clear();
        for k in 0..s.len() {
            let m = s.dim(k);
            if k < nb {
                let d = s.diagonal_mut(k);
                for i in 0..m {
                    for j in 0..m {
                        d[(i, j)] = rng.random_range(-1.0..1.0) + if i == j { 4.0 } else { 0.0 };
                    }
                }
            }
        }
        for &(j, b) in edges {
            // edges are (joint, body)
            let (mj, mb) = (s.dim(j), s.dim(b));
            let g = nalgebra::DMatrix::from_fn(mj, mb, |_, _| rng.random_range(-1.0..1.0));
            let p = nalgebra::DMatrix::from_fn(mb, mj, |_, _| rng.random_range(-1.0..1.0));
            s.block_mut(j, b).unwrap().view_mut((0, 0), (mj, mb)).copy_from(&g);
            s.block_mut(b, j).unwrap().view_mut((0, 0), (mb, mj)).copy_from(&(-g.transpose() + p * 0.1));
        }
    }

    fn check_against_dense(rng: &mut ChaCha8Rng, nb: usize, loops: usize) -> (usize, f64) {
        let (dims, edges, order) = random_graph(rng, nb, loops);
        let mut s = GraphSolver::new(&dims, &edges, &order).unwrap();
        fill_random(rng, &mut s, &edges, nb);
        let dense = s.to_dense();
        let offsets = s.offsets();
        let rhs = DVector::from_fn(dense.nrows(), |_, _| rng.random_range(-1.0..1.0));
        let expected = dense.clone().lu().solve(&rhs).unwrap();
        let sv = dense.clone().singular_values();
        let cond = sv.max() / sv.min();
        let mut b: Vec<Vector6<f64>> = (0..s.len())
            .map(|k| {
                let mut v = Vector6::zeros();
                v.rows_mut(0, dims[k]).copy_from(&rhs.rows(offsets[k], dims[k]));
                v
            })
            .collect();
        if let Err(k) = s.factorize() {
            panic!("pivot {k} dims {dims:?} edges {edges:?} cond {cond:e}");
        }
        s.solve(&mut b);
        let mut err = 0.0_f64;
        for k in 0..s.len() {
            for i in 0..dims[k] {
                err = err.max((b[k][i] - expected[offsets[k] + i]).abs());
            }
            for i in dims[k]..6 {
                assert_eq!(b[k][i], 0.0, "padding must stay zero");
            }
        }
        // both solves are backward stable: they may differ by ~cond·ε relative
        assert!(cond < 1e4, "test system unexpectedly ill-conditioned: {cond:e}");
        (s.fill_edges(), err / expected.amax().max(1.0))
    }

    #[test]
    fn trees_factorise_without_fill_and_match_dense_lu() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for nb in [1, 2, 5, 17, 40] {
            for _ in 0..5 {
                let (fill, err) = check_against_dense(&mut rng, nb, 0);
                assert_eq!(fill, 0, "a tree must not fill in");
                assert!(err < 1e-12, "nb={nb}: relative error {err:e}");
            }
        }
    }

    #[test]
    fn looped_graphs_match_dense_lu() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for (nb, loops) in [(3, 1), (4, 2), (10, 3), (30, 6)] {
            for _ in 0..5 {
                let (_, err) = check_against_dense(&mut rng, nb, loops);
                assert!(err < 1e-12, "nb={nb} loops={loops}: relative error {err:e}");
            }
        }
    }

    /// The factorisation and solve compiled for AVX2 (taken where the CPU has it) give the
    /// bits of the baseline build's, so results do not depend on the machine: the wider
    /// vectors change neither the operations nor their order (no fused multiply–adds).
    #[test]
    fn avx2_code_gives_the_baseline_bits() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for (nb, loops) in [(5, 0), (17, 0), (10, 3), (30, 6)] {
            let (dims, edges, order) = random_graph(&mut rng, nb, loops);
            let mut dispatched = GraphSolver::new(&dims, &edges, &order).unwrap();
            fill_random(&mut rng, &mut dispatched, &edges, nb);
            let mut baseline = dispatched.clone();
            dispatched.factorize().unwrap();
            baseline.factorize_here().unwrap();
            assert_eq!(dispatched.blocks, baseline.blocks, "factors, nb={nb}");
            assert_eq!(dispatched.dinv, baseline.dinv, "pivot inverses, nb={nb}");
            let rhs: Vec<Vector6<f64>> =
                (0..dims.len()).map(|k| Vector6::from_fn(|i, _| if i < dims[k] { rng.random_range(-1.0..1.0) } else { 0.0 })).collect();
            let (mut x, mut y) = (rhs.clone(), rhs);
            dispatched.solve(&mut x);
            baseline.solve_here(&mut y);
            assert_eq!(x, y, "solve, nb={nb}");
        }
    }

    #[test]
    fn chain_is_eliminated_leaves_first() {
        // world – j0 – b0 – j1 – b1 – j2 – b2: bodies 0..3, joints 3..6
        let dims = [6, 6, 6, 5, 5, 5];
        let edges = [(3, 0), (4, 0), (4, 1), (5, 1), (5, 2)];
        let (order, is_loop) = elimination_order(3, &[(None, 0), (Some(0), 1), (Some(1), 2)]);
        assert_eq!(is_loop, vec![false; 3]);
        let s = GraphSolver::new(&dims, &edges, &order).unwrap();
        assert_eq!(s.order().collect::<Vec<_>>(), vec![2, 5, 1, 4, 0, 3]);
        assert_eq!(s.fill_edges(), 0);
    }

    #[test]
    fn singular_pivot_is_reported_with_its_node() {
        // a joint of 2 rows on a body whose coupling block has rank 1: its Schur pivot is singular
        let dims = [6, 2];
        let edges = [(1, 0)];
        let mut s = GraphSolver::new(&dims, &edges, &[0, 1]).unwrap();
        s.clear();
        *s.diagonal_mut(0) = Matrix6::identity();
        let b = s.block_mut(1, 0).unwrap();
        b[(0, 0)] = 1.0;
        b[(1, 0)] = 2.0;
        *s.block_mut(0, 1).unwrap() = Matrix6::identity();
        assert_eq!(s.factorize(), Err(1));
    }
}
