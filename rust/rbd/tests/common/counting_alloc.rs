//! A counting global allocator for the "hot paths allocate nothing" tests of every crate
//! (included with `#[path]`): it wraps the system allocator and counts per thread, so the
//! test harness's own threads cannot disturb the count. The including test file must
//! install it: `#[global_allocator] static ALLOC: CountingAlloc = CountingAlloc;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

pub struct CountingAlloc;

thread_local! {
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

fn count() -> usize {
    COUNT.with(Cell::get)
}

fn bump() {
    COUNT.with(|c| c.set(c.get() + 1));
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

pub fn allocations<T>(f: impl FnOnce() -> T) -> usize {
    let before = count();
    std::hint::black_box(f());
    count() - before
}
