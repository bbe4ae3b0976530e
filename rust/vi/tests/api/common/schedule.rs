//! Helpers of the contact schedules (`schedule_tests`).

/// Row-major `(steps, m)` flags from the active sets of the steps.
pub(crate) fn masks(m: usize, steps: &[&[usize]]) -> Vec<bool> {
    steps.iter().flat_map(|active| (0..m).map(move |i| active.contains(&i))).collect()
}
