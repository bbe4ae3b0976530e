//! Versioned, checksummed binary states: what pickling and saving write, and the model's
//! content hash.
//!
//! A state is
//!
//! ```text
//! "vidyn\0" | kind name (u8 length + UTF-8) | format version (u16) | payload | SHA-256 of all before
//! ```
//!
//! with every number little-endian (`usize` as `u64`, `f64` as its bits, so values come back
//! bit for bit, NaN payloads and signed zeros included) and every sequence prefixed by its
//! length. The kind name lets a reader refuse the state of another kind of object, the
//! version a state written by a newer format, and the digest any corruption. A reader knows
//! the versions up to its own: a format change bumps the version and keeps reading the old
//! ones (or refuses them by name).
//!
//! [`Model::to_state`] writes the data that define a model — name, joints, parents,
//! placements, inertias, limits, gravity, frames, the gimbals of a single-dof expansion and,
//! from version 2, its mimic joints ([`crate::mimic`]) —
//! and [`Model::from_state`] rebuilds it through [`ModelBuilder`], so a state is validated as
//! any model is (then the derived fields, which the builder recomputes, are equal).
//! [`Model::content_hash`] is the state's digest: stable across processes and machines, and
//! equal for two models exactly when their defining data are equal bit for bit.

use crate::error::{RbdError, Result};
use crate::joint::Joint;
use crate::mimic::Mimic;
use crate::model::{Frame, FrameKind, JointLimits, Limits, Model, ModelBuilder};
use crate::single_dof::Gimbal;
use nalgebra::{Matrix3, Vector3};
use sha2::{Digest, Sha256};
use vidyn_spatial::{Inertia, Motion, Se3};

/// The first bytes of every state.
const MAGIC: &[u8; 6] = b"vidyn\0";
/// Bytes of the SHA-256 digest that ends a state.
const DIGEST: usize = 32;

/// The kind name of a model's state.
pub const MODEL_KIND: &str = "Model";
/// The newest format version [`Model::to_state`] writes and [`Model::from_state`] reads: 2
/// adds the mimic joints after the gimbals. A model without mimic joints is written in
/// version 1, byte for byte as before, so its state and content hash do not change.
pub const MODEL_VERSION: u16 = 2;

/// Writes one state: the header on creation, then the payload, then the digest on
/// [`StateWriter::finish`].
#[derive(Debug)]
pub struct StateWriter {
    buf: Vec<u8>,
}

impl StateWriter {
    /// A state of kind `kind` (at most 255 bytes), format version `version`.
    #[must_use]
    pub fn new(kind: &str, version: u16) -> Self {
        let mut w = Self { buf: Vec::with_capacity(256) };
        w.buf.extend_from_slice(MAGIC);
        let name = &kind.as_bytes()[..kind.len().min(255)];
        w.u8(name.len() as u8);
        w.buf.extend_from_slice(name);
        w.buf.extend_from_slice(&version.to_le_bytes());
        w
    }
    pub fn u8(&mut self, x: u8) {
        self.buf.push(x);
    }
    pub fn bool(&mut self, x: bool) {
        self.u8(u8::from(x));
    }
    pub fn u64(&mut self, x: u64) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
    pub fn usize(&mut self, x: usize) {
        self.u64(x as u64);
    }
    /// `f64` as its bits (exact).
    pub fn f64(&mut self, x: f64) {
        self.u64(x.to_bits());
    }
    /// A length-prefixed sequence of `f64`.
    pub fn f64s(&mut self, xs: &[f64]) {
        self.usize(xs.len());
        xs.iter().for_each(|&x| self.f64(x));
    }
    /// A length-prefixed sequence of `usize`.
    pub fn usizes(&mut self, xs: &[usize]) {
        self.usize(xs.len());
        xs.iter().for_each(|&x| self.usize(x));
    }
    /// A length-prefixed sequence of flags.
    pub fn bools(&mut self, xs: &[bool]) {
        self.usize(xs.len());
        xs.iter().for_each(|&x| self.bool(x));
    }
    /// A length-prefixed byte string (e.g. a nested state).
    pub fn bytes(&mut self, xs: &[u8]) {
        self.usize(xs.len());
        self.buf.extend_from_slice(xs);
    }
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    /// `None` as 0, `Some(i)` as 1 then `i`.
    pub fn opt_usize(&mut self, x: Option<usize>) {
        self.opt(x, Self::usize);
    }
    /// `None` as 0, `Some(x)` as 1 then `x` written by `put`.
    pub fn opt<T>(&mut self, x: Option<T>, put: impl FnOnce(&mut Self, T)) {
        match x {
            None => self.u8(0),
            Some(x) => {
                self.u8(1);
                put(self, x);
            }
        }
    }
    pub fn vector3(&mut self, v: &Vector3<f64>) {
        v.iter().for_each(|&x| self.f64(x));
    }
    /// Rotation (column-major) then translation.
    pub fn se3(&mut self, m: &Se3) {
        m.rotation.iter().for_each(|&x| self.f64(x));
        self.vector3(&m.translation);
    }
    /// Mass, centre of mass, rotational inertia (column-major).
    pub fn inertia(&mut self, i: &Inertia) {
        self.f64(i.mass);
        self.vector3(&i.com);
        i.rot_inertia.iter().for_each(|&x| self.f64(x));
    }
    /// The state: header, payload and the SHA-256 digest of both.
    #[must_use]
    pub fn finish(mut self) -> Vec<u8> {
        let digest = Sha256::digest(&self.buf);
        self.buf.extend_from_slice(&digest);
        self.buf
    }
}

/// Reads one state written by [`StateWriter`]: the header and digest are checked on
/// creation; every read names what it reads, for the error of a malformed state.
#[derive(Debug)]
pub struct StateReader<'a> {
    /// Header and payload (the digest stripped).
    data: &'a [u8],
    pos: usize,
    kind: &'static str,
    version: u16,
}

impl<'a> StateReader<'a> {
    /// A reader of `data`, which must be a state of kind `kind` with a format version of at
    /// most `newest`, whose digest matches.
    ///
    /// # Errors
    /// [`RbdError::State`] naming what is wrong: not a vidyn state, another kind, a newer
    /// version, truncated or corrupted.
    pub fn new(data: &'a [u8], kind: &'static str, newest: u16) -> Result<Self> {
        if data.len() < MAGIC.len() || &data[..MAGIC.len()] != MAGIC {
            return Err(RbdError::State(format!("not a vidyn state: a {kind} state starts with b\"vidyn\\x00\" (got {} bytes that do not)", data.len())));
        }
        let header = MAGIC.len() + 1;
        let name_len = usize::from(*data.get(MAGIC.len()).unwrap_or(&0));
        if data.len() < header + name_len + 2 + DIGEST {
            return Err(RbdError::State(format!("truncated vidyn state ({} bytes): expected a {kind} state", data.len())));
        }
        let found = String::from_utf8_lossy(&data[header..header + name_len]);
        if found != kind {
            return Err(RbdError::State(format!("this state holds a {found}, not a {kind}")));
        }
        let at = header + name_len;
        let version = u16::from_le_bytes([data[at], data[at + 1]]);
        let (body, digest) = data.split_at(data.len() - DIGEST);
        if Sha256::digest(body).as_slice() != digest {
            return Err(RbdError::State(format!("corrupted {kind} state: its checksum does not match its contents (truncated or altered)")));
        }
        if version == 0 || version > newest {
            return Err(RbdError::State(format!(
                "{kind} state of format version {version}: this vidyn ({}) reads versions 1 to {newest}; load it with the vidyn that saved it or a newer one",
                env!("CARGO_PKG_VERSION")
            )));
        }
        Ok(Self { data: body, pos: at + 2, kind, version })
    }

    /// The state's format version.
    #[must_use]
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The error of a malformed state, `detail` saying what.
    #[must_use]
    pub fn malformed(&self, detail: impl std::fmt::Display) -> RbdError {
        RbdError::State(format!("malformed {} state: {detail}", self.kind))
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let rest = self.data.len() - self.pos;
        if n > rest {
            return Err(self.malformed(format!("{what} needs {n} bytes at offset {}, {rest} left", self.pos)));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    pub fn bool(&mut self, what: &str) -> Result<bool> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.malformed(format!("{what} is the byte {b}, expected a flag (0 or 1)"))),
        }
    }
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }
    pub fn usize(&mut self, what: &str) -> Result<usize> {
        let x = self.u64(what)?;
        usize::try_from(x).map_err(|_| self.malformed(format!("{what} = {x} does not fit in this machine's usize")))
    }
    pub fn f64(&mut self, what: &str) -> Result<f64> {
        Ok(f64::from_bits(self.u64(what)?))
    }
    /// A sequence length whose elements take at least `min_bytes` each: refused when the
    /// state is too short to hold them (so a corrupted length never allocates).
    pub fn len(&mut self, what: &str, min_bytes: usize) -> Result<usize> {
        let n = self.usize(what)?;
        let rest = self.data.len() - self.pos;
        if n.saturating_mul(min_bytes.max(1)) > rest {
            return Err(self.malformed(format!("{what} claims {n} entries but {rest} bytes are left")));
        }
        Ok(n)
    }
    pub fn f64s(&mut self, what: &str) -> Result<Vec<f64>> {
        let n = self.len(what, 8)?;
        (0..n).map(|_| self.f64(what)).collect()
    }
    pub fn usizes(&mut self, what: &str) -> Result<Vec<usize>> {
        let n = self.len(what, 8)?;
        (0..n).map(|_| self.usize(what)).collect()
    }
    pub fn bools(&mut self, what: &str) -> Result<Vec<bool>> {
        let n = self.len(what, 1)?;
        (0..n).map(|_| self.bool(what)).collect()
    }
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = self.len(what, 1)?;
        self.take(n, what)
    }
    pub fn string(&mut self, what: &str) -> Result<String> {
        let b = self.bytes(what)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.malformed(format!("{what} is not UTF-8")))
    }
    pub fn opt_usize(&mut self, what: &str) -> Result<Option<usize>> {
        self.opt(what, |r| r.usize(what))
    }
    /// An optional value written by [`StateWriter::opt`], read by `get`.
    pub fn opt<T>(&mut self, what: &str, get: impl FnOnce(&mut Self) -> Result<T>) -> Result<Option<T>> {
        if self.bool(what)? {
            get(self).map(Some)
        } else {
            Ok(None)
        }
    }
    pub fn vector3(&mut self, what: &str) -> Result<Vector3<f64>> {
        Ok(Vector3::new(self.f64(what)?, self.f64(what)?, self.f64(what)?))
    }
    pub fn matrix3(&mut self, what: &str) -> Result<Matrix3<f64>> {
        let mut m = Matrix3::zeros();
        for x in m.iter_mut() {
            *x = self.f64(what)?;
        }
        Ok(m)
    }
    pub fn se3(&mut self, what: &str) -> Result<Se3> {
        let rotation = self.matrix3(what)?;
        Ok(Se3::new(rotation, self.vector3(what)?))
    }
    pub fn inertia(&mut self, what: &str) -> Result<Inertia> {
        let mass = self.f64(what)?;
        let com = self.vector3(what)?;
        Ok(Inertia { mass, com, rot_inertia: self.matrix3(what)? })
    }
    /// Checks that the payload was read to its end.
    pub fn finish(self) -> Result<()> {
        let rest = self.data.len() - self.pos;
        if rest != 0 {
            return Err(self.malformed(format!("{rest} bytes are left after its last field")));
        }
        Ok(())
    }
}

/// Bytes of the smallest body entry (a joint tag, a name length, a parent flag, a placement
/// and an inertia), to bound the body count of a state before reading it.
const MIN_BODY_BYTES: usize = 1 + 8 + 1 + 12 * 8 + 13 * 8;

fn write_joint(w: &mut StateWriter, joint: &Joint) {
    match joint {
        Joint::Revolute { axis } => {
            w.u8(0);
            w.vector3(axis);
        }
        Joint::Prismatic { axis } => {
            w.u8(1);
            w.vector3(axis);
        }
        Joint::Spherical => w.u8(2),
        Joint::FreeFlyer => w.u8(3),
        Joint::Planar => w.u8(4),
    }
}

fn read_joint(r: &mut StateReader<'_>) -> Result<Joint> {
    Ok(match r.u8("joint kind")? {
        0 => Joint::Revolute { axis: r.vector3("revolute axis")? },
        1 => Joint::Prismatic { axis: r.vector3("prismatic axis")? },
        2 => Joint::Spherical,
        3 => Joint::FreeFlyer,
        4 => Joint::Planar,
        t => return Err(r.malformed(format!("joint kind tag {t} is not one of 0..=4"))),
    })
}

const FRAME_KINDS: [FrameKind; 4] = [FrameKind::Joint, FrameKind::FixedJoint, FrameKind::Body, FrameKind::Operational];

impl Model {
    /// The model's state ([module documentation](self)): its defining data, versioned and
    /// checksummed. Equal bit for bit for equal models, so it is also what equality and
    /// [`Self::content_hash`] compare.
    #[must_use]
    pub fn to_state(&self) -> Vec<u8> {
        let mut w = StateWriter::new(MODEL_KIND, self.state_version());
        self.write_state(&mut w);
        w.finish()
    }

    /// The format version of this model's state: 1 without mimic joints, 2 with.
    fn state_version(&self) -> u16 {
        if self.mimics.is_empty() {
            1
        } else {
            MODEL_VERSION
        }
    }

    fn write_state(&self, w: &mut StateWriter) {
        // Destructured field by field, so that a field added to the model fails to compile
        // here until it is written (and the format's version bumped). The derived fields are
        // recomputed by the builder on reading.
        let Model {
            name,
            joints,
            joint_names,
            parents,
            joint_placements,
            inertias,
            children: _,
            idx_q: _,
            idx_v: _,
            nv_subtree: _,
            subtree_size: _,
            nq: _,
            nv: _,
            gravity,
            limits,
            frames,
            gimbals,
            mimics,
        } = self;
        w.str(name);
        w.usize(joints.len());
        for i in 0..joints.len() {
            write_joint(w, &joints[i]);
            w.str(&joint_names[i]);
            w.opt_usize(parents[i]);
            w.se3(&joint_placements[i]);
            w.inertia(&inertias[i]);
        }
        let Limits { lower_position, upper_position, velocity, effort, damping, friction } = limits;
        for v in [lower_position, upper_position, velocity, effort, damping, friction] {
            w.f64s(v);
        }
        w.vector3(&gravity.linear);
        w.vector3(&gravity.angular);
        w.usize(frames.len());
        for Frame { name, parent, placement, kind } in frames {
            w.str(name);
            w.opt_usize(*parent);
            w.se3(placement);
            w.u8(FRAME_KINDS.iter().position(|k| k == kind).unwrap_or(0) as u8);
        }
        w.usize(gimbals.len());
        for Gimbal { joint, pitch } in gimbals {
            w.str(joint);
            w.usize(*pitch);
        }
        if !mimics.is_empty() {
            w.usize(mimics.len());
            for Mimic { joint, leader, multiplier, offset } in mimics {
                w.usize(*joint);
                w.usize(*leader);
                w.f64(*multiplier);
                w.f64(*offset);
            }
        }
    }

    /// The model of a state written by [`Self::to_state`], rebuilt and validated as any
    /// model is; equal to the one that wrote it.
    ///
    /// # Errors
    /// [`RbdError::State`] for bytes that are not a model's state (truncated, corrupted,
    /// another kind, a newer format) or that describe an invalid model.
    pub fn from_state(data: &[u8]) -> Result<Self> {
        let mut r = StateReader::new(data, MODEL_KIND, MODEL_VERSION)?;
        let name = r.string("model name")?;
        let n = r.len("body count", MIN_BODY_BYTES)?;
        let mut b = ModelBuilder::new(&name);
        let mut joints = Vec::with_capacity(n);
        let mut parents = Vec::with_capacity(n);
        for i in 0..n {
            let joint = read_joint(&mut r)?;
            let joint_name = r.string("joint name")?;
            let parent = r.opt_usize("parent body")?;
            if parent.is_some_and(|p| p >= i) {
                return Err(r.malformed(format!("body {i}'s parent {parent:?} does not precede it")));
            }
            let placement = r.se3("joint placement")?;
            let inertia = r.inertia("body inertia")?;
            b.add_body(parent, &joint_name, joint, placement, inertia).map_err(|e| r.malformed(format!("body {i}: {e}")))?;
            joints.push(joint);
            parents.push(parent);
        }
        let (nq, nv) = (joints.iter().map(Joint::nq).sum::<usize>(), joints.iter().map(Joint::nv).sum::<usize>());
        let mut limits = Vec::with_capacity(6);
        for (what, len) in
            [("lower position limits", nq), ("upper position limits", nq), ("velocity limits", nv), ("effort limits", nv), ("damping", nv), ("friction", nv)]
        {
            let v = r.f64s(what)?;
            if v.len() != len {
                return Err(r.malformed(format!("{what} have {} entries, expected {len}", v.len())));
            }
            limits.push(v);
        }
        let (mut iq, mut iv) = (0, 0);
        for (i, joint) in joints.iter().enumerate() {
            let (q, v) = (iq..iq + joint.nq(), iv..iv + joint.nv());
            let l = JointLimits {
                lower: limits[0][q.clone()].to_vec(),
                upper: limits[1][q].to_vec(),
                velocity: limits[2][v.clone()].to_vec(),
                effort: limits[3][v.clone()].to_vec(),
                damping: limits[4][v.clone()].to_vec(),
                friction: limits[5][v].to_vec(),
            };
            b.set_limits(i, l).map_err(|e| r.malformed(e))?;
            (iq, iv) = (iq + joint.nq(), iv + joint.nv());
        }
        let gravity = Motion::new(r.vector3("gravity")?, r.vector3("gravity")?);
        let frames = r.len("frame count", 8 + 1 + 12 * 8 + 1)?;
        for _ in 0..frames {
            let name = r.string("frame name")?;
            let parent = r.opt_usize("frame parent")?;
            if parent.is_some_and(|p| p >= n) {
                return Err(r.malformed(format!("frame '{name}' is on body {parent:?} of {n}")));
            }
            let placement = r.se3("frame placement")?;
            let tag = usize::from(r.u8("frame kind")?);
            let kind = *FRAME_KINDS.get(tag).ok_or_else(|| r.malformed(format!("frame kind tag {tag} is not one of 0..=3")))?;
            b.add_frame(&name, parent, placement, kind).map_err(|e| r.malformed(e))?;
        }
        let count = r.len("gimbal count", 16)?;
        let mut gimbals = Vec::with_capacity(count);
        for _ in 0..count {
            let joint = r.string("gimbal joint")?;
            let pitch = r.usize("gimbal pitch")?;
            if pitch >= nq {
                return Err(r.malformed(format!("gimbal of '{joint}' at q[{pitch}], past nq = {nq}")));
            }
            gimbals.push(Gimbal { joint, pitch });
        }
        let mut model = b.build().map_err(|e| r.malformed(e))?;
        if model.parents != parents {
            return Err(r.malformed("its bodies are not numbered depth-first"));
        }
        model.gravity = gravity;
        model.gimbals = gimbals;
        if r.version() >= 2 {
            let count = r.len("mimic count", 32)?;
            let mut mimics = Vec::with_capacity(count);
            for _ in 0..count {
                let (joint, leader) = (r.usize("mimic joint")?, r.usize("mimic leader")?);
                mimics.push(Mimic { joint, leader, multiplier: r.f64("mimic multiplier")?, offset: r.f64("mimic offset")? });
            }
            model = model.with_mimics(mimics).map_err(|e| r.malformed(e))?;
        }
        r.finish()?;
        Ok(model)
    }

    /// A stable content hash: the hexadecimal SHA-256 digest of [`Self::to_state`] (without
    /// it), the same in every process and on every machine; two models have the same hash
    /// exactly when their defining data are equal bit for bit (and the state format's
    /// version is the same).
    #[must_use]
    pub fn content_hash(&self) -> String {
        hex_digest(&self.to_state())
    }
}

/// The digest that ends a state, in hexadecimal (64 characters).
#[must_use]
pub fn hex_digest(state: &[u8]) -> String {
    state[state.len().saturating_sub(DIGEST)..].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{pendulum_chain, random_tree};
    use crate::model::FrameKind;

    /// Models of every joint kind, with frames, limits, changed gravity and gimbals.
    fn models() -> Vec<Model> {
        let mut tree = random_tree(9, 3, &Joint::examples());
        tree.gravity.linear = Vector3::new(0.1, -0.0, -9.7);
        tree.limits.effort[0] = 12.5;
        let single = tree.to_single_dof().expect("expands").0;
        assert!(!single.gimbals.is_empty());
        let mut b = ModelBuilder::new("framed");
        let body =
            b.add_body(None, "j0", Joint::FreeFlyer, Se3::identity(), Inertia::new(2.0, Vector3::new(0.1, 0.0, 0.0), Matrix3::identity())).expect("adds");
        b.add_frame("tool", Some(body), Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, 0.3)), FrameKind::Operational).expect("adds");
        b.add_frame("anchor", None, Se3::identity(), FrameKind::Operational).expect("adds");
        vec![pendulum_chain(5, true), pendulum_chain(3, false), tree, single, b.build().expect("builds")]
    }

    #[test]
    fn states_round_trip_to_equal_models() {
        for m in models() {
            let state = m.to_state();
            let back = Model::from_state(&state).expect("reads its own state");
            assert_eq!(back, m, "{}", m.name);
            assert_eq!(back.to_state(), state, "{}", m.name);
            assert_eq!(back.content_hash(), m.content_hash());
            assert_eq!(m.content_hash().len(), 64);
        }
    }

    #[test]
    fn hash_changes_with_any_defining_datum() {
        let m = pendulum_chain(3, true);
        let mut heavier = m.clone();
        heavier.inertias[2].mass = f64::from_bits(heavier.inertias[2].mass.to_bits() + 1);
        let mut renamed = m.clone();
        renamed.frames[0].name.push('x');
        let mut signed_zero = m.clone();
        signed_zero.gravity.linear.x = -0.0;
        for other in [heavier, renamed, signed_zero] {
            assert_ne!(other.content_hash(), m.content_hash());
        }
    }

    #[test]
    fn damaged_states_are_refused_with_a_reason() {
        let state = random_tree(4, 1, &Joint::examples()).to_state();
        for i in (0..state.len()).step_by(7) {
            let mut bad = state.clone();
            bad[i] ^= 0x10;
            assert!(matches!(Model::from_state(&bad), Err(RbdError::State(_))), "byte {i}");
        }
        for len in [0, 3, 10, state.len() - 1] {
            assert!(matches!(Model::from_state(&state[..len]), Err(RbdError::State(_))), "length {len}");
        }
        let other = StateWriter::new("Trajectory", 1).finish();
        assert!(matches!(Model::from_state(&other), Err(RbdError::State(m)) if m.contains("holds a Trajectory, not a Model")));
        let newer = StateWriter::new(MODEL_KIND, MODEL_VERSION + 1).finish();
        assert!(matches!(Model::from_state(&newer), Err(RbdError::State(m)) if m.contains(&format!("version {}", MODEL_VERSION + 1))));
    }

    #[test]
    fn well_formed_but_invalid_states_are_refused() {
        // a checksummed state whose body count exceeds what it holds
        let mut w = StateWriter::new(MODEL_KIND, MODEL_VERSION);
        w.str("huge");
        w.usize(usize::MAX / 2);
        assert!(matches!(Model::from_state(&w.finish()), Err(RbdError::State(m)) if m.contains("claims")));
        // a body whose parent follows it
        let mut w = StateWriter::new(MODEL_KIND, MODEL_VERSION);
        w.str("loop");
        w.usize(1);
        write_joint(&mut w, &Joint::Revolute { axis: Vector3::z() });
        w.str("j");
        w.opt_usize(Some(0));
        w.se3(&Se3::identity());
        w.inertia(&Inertia::new(1.0, Vector3::zeros(), Matrix3::identity()));
        w.u64(0);
        assert!(matches!(Model::from_state(&w.finish()), Err(RbdError::State(m)) if m.contains("does not precede")));
        // trailing bytes after a valid model
        let m = pendulum_chain(1, true);
        let mut w = StateWriter::new(MODEL_KIND, m.state_version());
        m.write_state(&mut w);
        w.u8(0);
        assert!(matches!(Model::from_state(&w.finish()), Err(RbdError::State(m)) if m.contains("left after")));
    }
}
