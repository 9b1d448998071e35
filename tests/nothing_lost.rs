//! Nothing silent, nothing lost: what real producers print around the lines latscope reads.

use crate::util::{run, stderr, write};

#[test]
fn protocol_lines_behind_a_status_line_written_over_are_read_as_a_terminal_shows_them() {
    // mpv --vo=wlshm writes its status line, then a carriage return, then libwayland's line
    let mut log = String::new();
    for k in 0..50u32 {
        let t = 1_000_000 + k * 16;
        let status = format!("\x1b[K AV: 00:00:{k:02} / 00:00:50 ({k}%) A-V:  0.000\r");
        let torn = if k % 2 == 0 { status.as_str() } else { "" };
        log.push_str(&format!("{torn}[{t:7}.000]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)\n"));
        log.push_str(&format!("{torn}[{t:7}.100]  -> wl_surface@3.commit()\n"));
        log.push_str(&format!("[{t:7}.900] wl_buffer@5.release()\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "mpv.log", log);
    let out = run(&["wayland", "-f", "json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let spans = crate::util::spans_by_name(&doc);
    let c2r = &spans["commit_to_release/client"];
    assert_eq!(c2r["count"], 50, "every commit paired: {c2r}");
    assert_eq!(c2r["orphan_ends"], 0);
    assert_eq!(doc["input"]["messages"], 150);
}
