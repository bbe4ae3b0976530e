//! Contacts between bodies in the graph: each is eliminated as a loop closure (fill counts).

use crate::common::body_contact::{ball_stack, sphere};
use std::sync::Arc;
use vidyn_maximal::*;

#[test]
fn body_contacts_are_eliminated_as_loop_closures() {
    // the stack: the free balls are separate trees, so each body contact is eliminated last,
    // after its balls; eliminating the middle ball joins its two contacts (one fill block)
    let (mech, _) = ball_stack(0.5);
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    assert_eq!(vi.fill_edges(), 1);
    // a contact between the ends of a 4-sphere chain closes the loop b0–j1–b1–j2–b2–j3–b3: it is
    // placed before their common ancestor b0 and fills in towards every node on the way (5)
    let (mut mech, _) = vidyn_maximal::models::sphere_chain(4);
    mech.add_body_contact("ends", (0, sphere(0.25)), (3, sphere(0.25)), 0.3).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    assert_eq!(vi.fill_edges(), 5);
}
