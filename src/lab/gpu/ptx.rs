//! The lab's kernels as PTX text, compiled by the driver at run time (`cuModuleLoadDataEx`):
//! neither building nor testing latscope needs a CUDA toolkit.
//!
//! PTX ISA 7.0 for `sm_70`: old enough for every driver since CUDA 11.0 (driver API version
//! 11000) and every GPU from Volta on; a newer GPU runs it too, the driver compiling it for its
//! own architecture. On `sm_70` and later a `volatile` access to global memory is a relaxed
//! access at system scope, which is what a flag shared with the host needs.
//!
//! `latscope_stamp(record, spin_ns)`: each block stamps `%globaltimer` at entry, spins until
//! `spin_ns` have passed on it (none for `nop`), stamps again, stores both into its own pair of
//! slots of the request's record in host-mapped memory, fences at system scope (`membar.sys`:
//! the stamps are visible to the host before the flag), then adds 1 to the record's counter, the
//! flag the host polls: the request is done when it equals the number of blocks. A record is 16
//! bytes of header (the counter, then padding) and 16 bytes per block (entry, exit).
//!
//! `latscope_ping(cell)`: the calibration ([`super::clock`]). It waits for the host to write a
//! new sequence number into `cell[0]`, stamps `%globaltimer` into `cell[8]`, fences, and
//! answers with the same number in `cell[4]`; `u32::MAX` ends it.

/// The PTX ISA version of the kernels.
pub const ISA: &str = "7.0";

/// The oldest driver (`cuDriverGetVersion`) that compiles PTX ISA 7.0: CUDA 11.0.
pub const MIN_DRIVER: i32 = 11_000;

/// The stamping kernel's name.
pub const STAMP: &str = "latscope_stamp";

/// The calibration kernel's name.
pub const PING: &str = "latscope_ping";

/// Bytes of a record's header (the counter).
pub const HEADER: usize = 16;

/// The value that ends the ping kernel.
pub const PING_STOP: u32 = u32::MAX;

/// The module: both kernels.
pub fn module() -> String {
    format!(
        "//\n// latscope lab gpu: submission stamps\n//\n.version {ISA}\n.target sm_70\n.address_size 64\n\n{}\n{}",
        stamp(),
        ping()
    )
}

fn stamp() -> String {
    format!(
        r#".visible .entry {STAMP}(
    .param .u64 record,
    .param .u64 spin_ns
)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<9>;

    mov.u64 %rd1, %globaltimer;
    ld.param.u64 %rd2, [record];
    cvta.to.global.u64 %rd2, %rd2;
    ld.param.u64 %rd3, [spin_ns];
    add.u64 %rd4, %rd1, %rd3;
SPIN:
    mov.u64 %rd5, %globaltimer;
    setp.lt.u64 %p1, %rd5, %rd4;
    @%p1 bra SPIN;
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd6, %r1, 16;
    add.u64 %rd7, %rd2, {HEADER};
    add.u64 %rd8, %rd7, %rd6;
    st.volatile.global.u64 [%rd8], %rd1;
    st.volatile.global.u64 [%rd8+8], %rd5;
    membar.sys;
    atom.sys.global.add.u32 %r2, [%rd2], 1;
    ret;
}}
"#
    )
}

fn ping() -> String {
    format!(
        r#".visible .entry {PING}(
    .param .u64 cell
)
{{
    .reg .pred %p<3>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;

    ld.param.u64 %rd1, [cell];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, 0;
WAIT:
    ld.volatile.global.u32 %r2, [%rd1];
    setp.eq.u32 %p1, %r2, %r1;
    @%p1 bra WAIT;
    setp.eq.u32 %p2, %r2, {PING_STOP};
    @%p2 bra DONE;
    mov.u64 %rd2, %globaltimer;
    st.volatile.global.u64 [%rd1+8], %rd2;
    membar.sys;
    st.volatile.global.u32 [%rd1+4], %r2;
    mov.u32 %r1, %r2;
    bra WAIT;
DONE:
    ret;
}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_declares_its_isa_and_target_and_both_kernels() {
        let m = module();
        assert!(
            m.contains(".version 7.0\n.target sm_70\n.address_size 64\n"),
            "{m}"
        );
        assert!(m.contains(".visible .entry latscope_stamp("), "{m}");
        assert!(m.contains(".visible .entry latscope_ping("), "{m}");
    }

    #[test]
    fn every_block_stores_its_stamps_before_the_fence_and_the_flag_after() {
        let m = stamp();
        let at = |s: &str| m.find(s).unwrap_or_else(|| panic!("{s} missing: {m}"));
        assert!(at("st.volatile.global.u64 [%rd8+8]") < at("membar.sys"));
        assert!(at("membar.sys") < at("atom.sys.global.add.u32"));
        // The record's header is the counter; each block's stamps follow at 16 bytes each.
        assert!(m.contains("add.u64 %rd7, %rd2, 16;"), "{m}");
        assert!(m.contains("mul.wide.u32 %rd6, %r1, 16;"), "{m}");
    }

    #[test]
    fn the_ping_answers_after_its_stamp_is_fenced_and_stops_on_the_sentinel() {
        let m = ping();
        let at = |what: &str| m.find(what).unwrap_or_else(|| panic!("no {what} in {m}"));
        assert!(at("st.volatile.global.u64 [%rd1+8]") < at("membar.sys"));
        assert!(at("membar.sys") < at("st.volatile.global.u32 [%rd1+4]"));
        assert!(m.contains("setp.eq.u32 %p2, %r2, 4294967295;"), "{m}");
    }

    #[test]
    fn every_label_branched_to_is_defined_once_per_kernel() {
        for k in [stamp(), ping()] {
            for target in k
                .lines()
                .filter_map(|l| l.trim().strip_suffix(';')?.split("bra ").nth(1))
            {
                let defined = k
                    .lines()
                    .filter(|l| l.trim() == format!("{target}:"))
                    .count();
                assert_eq!(defined, 1, "{target} in {k}");
            }
        }
    }
}
