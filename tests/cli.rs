//! End-to-end tests of the `vramlab` binary, as a user runs it.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn vramlab(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vramlab"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("vramlab runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A failure the way users should see it: non-zero exit, one line on stderr, no panic.
fn assert_clean_failure(output: &Output, must_contain: &[&str]) -> String {
    let err = stderr(output);
    assert!(!output.status.success(), "should fail: {err}");
    assert_eq!(output.status.code(), Some(1), "exit code: {err}");
    assert!(!err.contains("panicked"), "panicked: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for needle in must_contain {
        assert!(err.contains(needle), "'{needle}' missing from: {err}");
    }
    err
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn default_run_writes_records_report_and_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["run"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let out = tmp.path().join("vramlab-out");
    for file in [
        "report.md",
        "report.html",
        "analysis.json",
        "h2d_pinned/sim.json",
        "h2d_pinned/sim.csv",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let files = files_under(&out);
    let pngs = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .count();
    let svgs = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .count();
    assert!(pngs >= 5 && pngs == svgs, "{pngs} PNG, {svgs} SVG");
    let png = std::fs::read(out.join("plots/h2d_pinned.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let svg = std::fs::read_to_string(out.join("plots/h2d_pinned.svg")).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("1 KiB"),
        "axis labels are drawn as text"
    );
    let csv = std::fs::read_to_string(out.join("h2d_pinned/sim.csv")).unwrap();
    assert!(
        csv.starts_with("experiment,backend,device,bytes,direction,host,gb_per_s,time_us"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 22, "header + 21 sizes");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("predictions only"), "says there is no measurement");
}

#[test]
fn same_seed_gives_byte_identical_records() {
    let tmp = tempfile::tempdir().unwrap();
    for out in ["a", "b"] {
        let output = vramlab(&["run", "transfers", "--seed", "7", "--out", out], tmp.path());
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let records: Vec<PathBuf> = files_under(&tmp.path().join("a"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "csv"))
        .collect();
    assert!(records.len() >= 10);
    for a in records {
        let b = tmp.path().join("b").join(a.strip_prefix(tmp.path().join("a")).unwrap());
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{} differs",
            a.display()
        );
    }
}

const SUITE: &str = "name = \"mine\"\n[[experiment]]\nname = \"mine_up\"\nfamily = \"transfer\"\n[experiment.sweep]\ndirection = \"h2d\"\nbytes = SIZES\n";

fn suite_file(dir: &Path, sizes: &str) -> String {
    let path = dir.join("mine.toml");
    std::fs::write(&path, SUITE.replace("SIZES", sizes)).unwrap();
    path.display().to_string()
}

#[test]
fn a_suite_file_runs_like_a_built_in_one() {
    let tmp = tempfile::tempdir().unwrap();
    let file = suite_file(tmp.path(), "[\"4 KiB\", \"3 MiB\"]");
    let output = vramlab(&["run", &file, "--out", "o"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let csv = std::fs::read_to_string(tmp.path().join("o/mine_up/sim.csv")).unwrap();
    assert!(csv.contains(",4096,") && csv.contains(",3145728,"), "{csv}");
}

#[test]
fn malformed_toml_names_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("broken.toml");
    std::fs::write(&path, "name = \"x\"\n[[experiment]\nname = \"y\"\n").unwrap();
    let output = vramlab(&["run", path.to_str().unwrap()], tmp.path());
    assert_clean_failure(&output, &["broken.toml:2:"]);
}

#[test]
fn zero_and_negative_sizes_are_refused_with_the_value() {
    let tmp = tempfile::tempdir().unwrap();
    for (sizes, shown) in [
        ("0", "bytes = 0"),
        ("[4096, -1]", "bytes = -1"),
        ("\"0 MiB\"", "bytes = \"0 MiB\""),
    ] {
        let file = suite_file(tmp.path(), sizes);
        let output = vramlab(&["run", &file], tmp.path());
        assert_clean_failure(&output, &["mine.toml:7:", shown, "positive"]);
    }
}

#[test]
fn unknown_names_list_the_valid_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["run", "h2d_pinnned"], tmp.path());
    assert_clean_failure(&output, &["'h2d_pinnned'", "transfers", "h2d_pinned", "overlap"]);
    let output = vramlab(&["run", "--profile", "a100"], tmp.path());
    assert_clean_failure(&output, &["'a100'", "h100"]);
    let output = vramlab(&["report", "nowhere"], tmp.path());
    assert_clean_failure(&output, &["nowhere"]);
}

/// Issue 38, item 10: replay names PyTorch's defaults `(defaults)` as tune does (never a bare
/// `PYTORCH_ALLOC_CONF=`), another setting by its quoted line, and explains its two columns
/// PyTorch has no figure for.
#[test]
fn replay_speaks_tunes_words() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("replay");
    let output = vramlab(
        &[
            "replay",
            &trace_file("resnet18_default.pickle"),
            "--alloc-conf",
            "",
            "--alloc-conf",
            "expandable_segments:True",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("(defaults): against the recording"), "{text}");
    assert!(
        text.contains("PYTORCH_ALLOC_CONF='expandable_segments:True': retries"),
        "{text}"
    );
    assert!(
        !text.contains("PYTORCH_ALLOC_CONF=:") && !text.contains("PYTORCH_ALLOC_CONF= "),
        "{text}"
    );
    assert!(text.contains("(frag: ") && text.contains("a+f p50 ns: "), "{text}");
}

/// Issue 38, item 9: a usage error (an unknown flag or command, a missing argument, bare
/// `vramlab`) prints as clap prints it, over several lines with the usage and a tip; an error
/// about a value keeps to one line (`bad_arguments_get_one_line_and_exit_2`).
#[test]
fn usage_errors_print_as_clap_does() {
    let tmp = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            &["tune", "x.pickle", "--bogus"][..],
            &["unexpected argument '--bogus'", "Usage: vramlab tune", "--help"][..],
        ),
        (&["tune"][..], &["<TRACE>", "Usage: vramlab tune <TRACE>"][..]),
        (
            &["frob"][..],
            &["unrecognized subcommand 'frob'", "Usage: vramlab <COMMAND>"][..],
        ),
        (&[][..], &["Usage: vramlab <COMMAND>", "Commands:", "  tune "][..]),
    ] {
        let output = vramlab(args, tmp.path());
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.trim_end().lines().count() > 2, "{args:?}: several lines: {err}");
        for said in says {
            assert!(err.contains(said), "{args:?}: '{said}' missing from: {err}");
        }
    }
}

#[test]
fn bad_arguments_get_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["run", "--backend", "gpu"], tmp.path());
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("'gpu'") && err.contains("sim, hw, both"), "{err}");
    let help = vramlab(&["run", "--help"], tmp.path());
    assert!(help.status.success() && String::from_utf8_lossy(&help.stdout).contains("--backend"));
}

#[test]
fn hw_without_a_gpu_says_so_in_one_line() {
    if hw::driver_present() {
        eprintln!("skipped: this machine has a CUDA driver, so --backend hw would really run");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        &["run", "--backend", "hw"][..],
        &["run", "--backend", "both"][..],
        &["calibrate"][..],
        // The parts' names before banks and coalescing had one name in every layer still parse.
        &["calibrate", "--part", "coalescing"][..],
        &["calibrate", "--part", "global"][..],
        &["calibrate", "--part", "shared"][..],
    ] {
        let output = vramlab(args, tmp.path());
        assert_clean_failure(&output, &["needs an NVIDIA GPU"]);
    }
}

#[test]
fn failures_never_truncate_results_already_written() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["run", "--out", "keep"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let before: Vec<(PathBuf, Vec<u8>)> = files_under(&tmp.path().join("keep"))
        .into_iter()
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    // A bad profile file, a bad suite and (without a GPU) the hw backend all fail into the same folder.
    std::fs::write(tmp.path().join("bad.toml"), "name = 3").unwrap();
    let bad_suite = suite_file(tmp.path(), "0");
    let mut attempts = vec![
        vec!["run", "--out", "keep", "--profile", "bad.toml"],
        vec!["run", &bad_suite, "--out", "keep"],
    ];
    if !hw::driver_present() {
        attempts.push(vec!["run", "--out", "keep", "--backend", "both"]);
    }
    for args in attempts {
        let output = vramlab(&args, tmp.path());
        assert!(!output.status.success());
    }
    for (path, bytes) in before {
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{} changed", path.display());
    }
    let leftovers: Vec<PathBuf> = files_under(&tmp.path().join("keep"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().contains(".tmp")))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn report_redraws_the_committed_h100_reference_without_a_gpu() {
    let reference = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/reference/h100/run");
    let tmp = tempfile::tempdir().unwrap();
    for name in ["h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable", "overlap"] {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for backend in ["sim.json", "hw.json"] {
            std::fs::copy(reference.join(name).join(backend), dir.join(backend)).unwrap();
        }
    }
    let output = vramlab(&["report", tmp.path().to_str().unwrap()], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let report = std::fs::read_to_string(tmp.path().join("report.md")).unwrap();
    assert!(report.contains("NVIDIA H100"), "names the measured GPU");
    assert!(
        report.contains("| all transfer experiments | 84 | 0 |"),
        "84 validation points, none used by calibration"
    );
}

#[test]
fn occupancy_model_still_matches_cudas_answers_measured_on_the_h100() {
    let reference =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/reference/h100/occupancy/run/occupancy/hw.json");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("occupancy")).unwrap();
    std::fs::copy(&reference, tmp.path().join("occupancy/hw.json")).unwrap();
    // Predict afresh with today's model into the same folder, then compare point by point.
    let output = vramlab(&["run", "occupancy", "--out", tmp.path().to_str().unwrap()], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let analysis: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("analysis.json")).unwrap()).unwrap();
    let points = analysis["experiments"][0]["points"].as_array().unwrap();
    assert!(points.len() >= 200, "{} shapes", points.len());
    let differing: Vec<&serde_json::Value> = points
        .iter()
        .filter(|p| p["relative_error"].as_f64() != Some(0.0))
        .collect();
    assert!(
        differing.is_empty(),
        "{} of {} shapes differ, e.g. {}",
        differing.len(),
        points.len(),
        differing[0]
    );
}

#[test]
fn explain_occupancy_shows_the_limit_and_refuses_bad_values() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(
        &[
            "explain",
            "occupancy",
            "threads=128",
            "registers=32",
            "dynamic_shared=100 KiB",
        ],
        tmp.path(),
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        text.contains("2 blocks per SM") && text.contains("limited by shared memory"),
        "{text}"
    );
    let output = vramlab(&["explain", "occupancy", "threads=2048", "registers=32"], tmp.path());
    assert_clean_failure(&output, &["threads = 2048", "1024"]);
    let output = vramlab(
        &[
            "explain",
            "occupancy",
            "threads=64",
            "registers=32",
            "static_shared=3 parsecs",
        ],
        tmp.path(),
    );
    assert_clean_failure(&output, &["static_shared", "parsecs"]);
}

fn trace_file(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/traces")
        .join(name)
        .display()
        .to_string()
}

/// A figure PyTorch reported when it recorded the trace.
fn pytorch_figure(file: &str, key: &str) -> f64 {
    let text = std::fs::read_to_string(trace_file(file)).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json[key].as_f64().unwrap()
}

#[test]
fn replay_json_reproduces_pytorchs_figures_for_resnet18() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = trace_file("resnet18_default.pickle");
    let output = vramlab(
        &["replay", &trace, "--policy", "caching,expandable", "--json"],
        tmp.path(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is one JSON object");
    // alloc, free_requested and free_completed each count as an event.
    assert_eq!(json["events"], 32416);
    let results = json["results"].as_array().unwrap();
    let figure = |policy: &str, key: &str| {
        results.iter().find(|r| r["policy"] == policy).unwrap()[key]
            .as_f64()
            .unwrap()
    };
    let close = |value: f64, target: f64, tolerance: f64| (value - target).abs() <= tolerance * target;
    let reserved = pytorch_figure("resnet18_default.json", "max_reserved_bytes");
    let expandable_reserved = pytorch_figure("resnet18_expandable.json", "max_reserved_bytes");
    let allocated = pytorch_figure("resnet18_default.json", "max_allocated_bytes");
    assert!(close(figure("caching", "peak_reserved_bytes"), reserved, 0.05));
    assert!(close(
        figure("expandable", "peak_reserved_bytes"),
        expandable_reserved,
        0.05
    ));
    assert!(close(figure("caching", "peak_allocated_bytes"), allocated, 0.01));
    assert_eq!(
        figure("caching", "segments_matched"),
        json["recorded_segments"].as_f64().unwrap()
    );
    assert!(tmp.path().join("vramlab-out/replay/replay.md").is_file());
    assert!(tmp
        .path()
        .join("vramlab-out/replay/plots/replay_peaks_sim.png")
        .is_file());
}

#[test]
fn bad_traces_fail_in_one_line_or_warn_with_the_event() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(trace_file("resnet18_default.pickle")).unwrap();
    let truncated = tmp.path().join("truncated.pickle");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let output = vramlab(&["replay", truncated.to_str().unwrap()], tmp.path());
    assert_clean_failure(&output, &["truncated.pickle", "truncated pickle"]);

    let wrong = tmp.path().join("wrong.json");
    std::fs::write(
        &wrong,
        r#"{"vramlab_trace": 1, "name": "x", "events": [{"op": "alloc", "size": 5}]}"#,
    )
    .unwrap();
    assert_clean_failure(
        &vramlab(&["replay", wrong.to_str().unwrap()], tmp.path()),
        &["wrong.json", "id"],
    );

    let log = tmp.path().join("log.csv");
    std::fs::write(
        &log,
        "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x1000,512,0x0\n1,10:00:00.000002,free,0x1000,512,0x0\n1,10:00:00.000003,free,0x1000,512,0x0\n1,10:00:00.000004,free,0x9000,64,0x0\n",
    )
    .unwrap();
    let output = vramlab(&["replay", log.to_str().unwrap(), "--policy", "caching"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("2 events") && err.contains("event 2: free of 0x1000"),
        "{err}"
    );

    let output = vramlab(&["replay", log.to_str().unwrap(), "--policy", "slab"], tmp.path());
    assert_clean_failure(&output, &["unknown policy 'slab'", "caching"]);
    let output = vramlab(
        &["replay", log.to_str().unwrap(), "--policy", "buddy:arena=3MiB"],
        tmp.path(),
    );
    assert_clean_failure(&output, &["arena = 3MiB", "power of two"]);
}

#[test]
fn replay_without_a_gpu_says_so() {
    if hw::driver_present() {
        eprintln!("skipped: this machine has a CUDA driver");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["replay", "synthetic:growing-vector", "--backend", "hw"], tmp.path());
    assert_clean_failure(&output, &["needs an NVIDIA GPU"]);
}

#[test]
fn explain_coalescing_and_constant_show_the_working() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["explain", "coalescing", "width=16", "stride=1"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("16 sector(s) in 4 line(s)") && text.contains("100% efficiency"),
        "{text}"
    );
    let output = vramlab(&["explain", "constant", "distinct=4", "cache=cold"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("4 pass(es)"));
    assert_clean_failure(
        &vramlab(&["explain", "coalescing", "width=3", "stride=1"], tmp.path()),
        &["width = 3"],
    );
    assert_clean_failure(
        &vramlab(&["explain", "coalescing", "width=4", "stride=0"], tmp.path()),
        &["stride = 0"],
    );
}

#[test]
fn the_two_gpu_peer_suite_predicts_with_a_profile_that_has_it_and_says_when_not() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/suites/peer.toml");
    let suite = suite.to_str().unwrap();
    let output = vramlab(&["run", suite, "--profile", "h200", "--out", "peer"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(tmp.path().join("peer/peer_read/sim.json").is_file());
    let output = vramlab(&["run", suite, "--profile", "h100", "--out", "peer100"], tmp.path());
    assert_clean_failure(&output, &["[peer]"]);
}

fn recording(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("reports/reference/h100/alloc-traces")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn replay_of_a_snapshot_defaults_to_its_own_settings_and_checks_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["replay", &recording("gpt/roundup4.pickle.gz"), "--json"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let result = &json["results"][0];
    assert_eq!(result["policy"], "PYTORCH_ALLOC_CONF=roundup_power2_divisions:4");
    let check = &result["recorded_check"];
    assert_eq!(check["verdict"], "match", "{check}");
    assert!(check["summary"].as_str().unwrap().starts_with("all "), "{check}");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(recording("gpt/roundup4.json")).unwrap()).unwrap();
    for key in [
        "reserved_bytes.all.peak",
        "allocated_bytes.all.peak",
        "num_device_alloc",
    ] {
        assert_eq!(result["pytorch_stats"][key], meta["memory_stats"][key], "{key}");
    }
}

#[test]
fn bad_settings_strings_are_one_line_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = recording("serve/default.pickle.gz");
    for (setting, needle) in [
        ("max_split_size_mb:10", "max_split_size_mb = 10"),
        ("roundup_power2_divisions:[3:2]", "interval 3"),
        ("garbage_collection_threshold:1.5", "garbage_collection_threshold = 1.5"),
        ("expandable_segments:yes", "expandable_segments = yes"),
        ("colour:blue", "Unrecognized key 'colour' in CUDA allocator config."),
    ] {
        let output = vramlab(&["replay", &trace, "--alloc-conf", setting], tmp.path());
        assert_clean_failure(&output, &[needle]);
        let output = vramlab(&["tune", &trace, "--grid", setting], tmp.path());
        assert_clean_failure(&output, &[needle]);
    }
}

/// A snapshot whose start was lost: tune's answer is about the window, and its terminal text,
/// tune.md and tune.html say so before the answer, as replay does, rather than only tune.json.
#[test]
fn tune_says_when_the_window_began_mid_run() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tune");
    let trace = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("reports/reference/h100/real-jobs/gpt-expandable-lost-11000.pickle.gz");
    let output = vramlab(
        &[
            "tune",
            trace.to_str().unwrap(),
            "--capacity",
            "3 GiB",
            "--grid",
            "",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for (name, said) in [
        ("stdout", text.into_owned()),
        ("tune.md", std::fs::read_to_string(out.join("tune.md")).unwrap()),
        ("tune.html", std::fs::read_to_string(out.join("tune.html")).unwrap()),
    ] {
        assert!(
            said.contains("began mid-run"),
            "{name} does not say the start was lost:\n{said}"
        );
        assert!(said.contains("window: began with"), "{name}");
    }
}

#[test]
fn tune_ranks_settings_and_writes_its_report() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tune");
    let output = vramlab(
        &[
            "tune",
            &recording("serve/default.pickle.gz"),
            "--capacity",
            "240947481",
            "--grid",
            "",
            "--grid",
            "expandable_segments:True",
            "--grid",
            "garbage_collection_threshold:0.7",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(text.contains("does not fit"), "{text}");
    for file in [
        "tune.json",
        "tune.md",
        "tune.html",
        "plots/tune_caps.png",
        "plots/tune_best_timeline.svg",
    ] {
        assert!(out.join(file).exists(), "{file} missing");
    }
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tune.json")).unwrap()).unwrap();
    let results = record["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    // Ranked: whatever fits comes before whatever does not.
    let fits: Vec<bool> = results.iter().map(|r| r["failed_allocs"] == 0).collect();
    assert!(fits.windows(2).all(|w| w[0] >= w[1]), "{fits:?}");
    // Then by the cap from which each fits at every larger one, not by a peak the cap clipped.
    let keys: Vec<(bool, u64)> = results
        .iter()
        .map(|r| (r["failed_allocs"] != 0, r["always_fits_bytes"].as_u64().unwrap()))
        .collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{keys:?}");
    // Each setting's verdict and the post-mortem: in tune.json, tune.md, tune.html and on the
    // terminal, the same text.
    let verdicts = record["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 3);
    let markdown = std::fs::read_to_string(out.join("tune.md")).unwrap();
    let html = std::fs::read_to_string(out.join("tune.html")).unwrap();
    let postmortem = record["postmortem"]["text"].as_array().unwrap();
    assert_eq!(record["postmortem"]["baseline_label"], "(defaults)");
    for line in verdicts.iter().map(|v| &v["text"]).chain(postmortem) {
        let line = line.as_str().unwrap();
        assert!(text.contains(line), "{line}");
        assert!(markdown.contains(line), "{line}");
        assert!(
            html.contains(&line.replace('"', "&quot;").replace('>', "&gt;")),
            "{line}"
        );
    }
    let defaults = verdicts.iter().find(|v| v["setting"] == "").unwrap();
    assert_eq!(defaults["label"], "(defaults)");
    // The serving workload fits at 270 MiB under PyTorch's defaults, fails at 274 MiB and fits
    // from 276 MiB up.
    assert_eq!(defaults["min_capacity_bytes"], 270u64 << 20);
    assert_eq!(defaults["always_fits_bytes"], 276u64 << 20);
    assert_eq!(defaults["monotone"], false);
    assert!(defaults["text"].as_str().unwrap().contains("Fitting is not monotone"));
    // Issue 38 item 15: the plot is of the cap each setting needs, not of peaks the cap clipped
    // (20 bars all at the cap): each row named by its rank and setting, its "fits at every cap
    // from" written beside a marker placed at it, fitting and failing in their own colours.
    assert!(!out.join("plots/tune_peaks.svg").exists());
    let svg = std::fs::read_to_string(out.join("plots/tune_caps.svg"))
        .unwrap()
        .replace("&apos;", "'");
    assert!(
        svg.contains("cap 229.8 MiB") || svg.contains("cap 230 MiB"),
        "the cap's line is named"
    );
    let mut markers: Vec<(u64, i64)> = Vec::new();
    for (rank, r) in results.iter().enumerate() {
        let label = match r["policy"].as_str().unwrap().trim_start_matches("PYTORCH_ALLOC_CONF=") {
            "" => "(defaults)".to_string(),
            setting => format!("'{setting}'"),
        };
        assert!(svg.contains(&format!("{}. {label}", rank + 1)), "row {label} unnamed");
        let always = r["always_fits_bytes"].as_u64().unwrap() >> 20;
        assert!(svg.contains(&format!("{always} MiB")), "{always} MiB not written");
        markers.push((always, 0));
    }
    // The filled markers, top to bottom (rank order), and where each lies across.
    let filled: Vec<(i64, i64)> = svg
        .split("<circle ")
        .skip(1)
        .map(|c| c.split('>').next().unwrap())
        .filter(|c| c.contains("r=\"7\"") && !c.contains("fill=\"none\""))
        .map(|c| {
            let attr = |name: &str| -> i64 {
                let from = c.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                c[from..].split('"').next().unwrap().parse().unwrap()
            };
            (attr("cy"), attr("cx"))
        })
        .collect();
    assert_eq!(filled.len(), results.len(), "one marker per setting");
    let mut by_row = filled.clone();
    by_row.sort();
    for (marker, (_, x)) in markers.iter_mut().zip(by_row) {
        marker.1 = x;
    }
    for a in &markers {
        for b in &markers {
            assert!(a.0 >= b.0 || a.1 < b.1, "markers out of place: {markers:?}");
        }
    }
    let (fitting, failing) = ("#009E73", "#D55E00");
    assert_eq!(svg.contains(failing), fits.iter().any(|f| !f), "failing colour");
    assert_eq!(svg.contains(fitting), fits.iter().any(|f| *f), "fitting colour");
}

/// What a shell makes of `line` followed by `printenv PYTORCH_ALLOC_CONF`: the setting a job
/// started after the pasted line reads (None where bash is missing).
fn pasted(line: &str, dir: &Path) -> Option<String> {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("{line} printenv PYTORCH_ALLOC_CONF"))
        .current_dir(dir)
        .output()
        .ok()?;
    assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .trim_end_matches('\n')
            .to_string(),
    )
}

/// Issue 38, item 4: every setting tune offers (the table's last column, the JSON's `paste`,
/// the verdicts, the answer, tune.html's line) survives being pasted into a shell, the
/// default grid's `roundup_power2_divisions:[64:8,256:4,1024:2,>:1]` included, and makes no
/// file named `:1]`.
#[test]
fn tune_offers_each_setting_quoted_so_that_it_survives_a_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tune");
    let awkward = "roundup_power2_divisions:[64:8,256:4,1024:2,>:1]";
    let grid = [
        "",
        "expandable_segments:True",
        awkward,
        "max_split_size_mb:128,garbage_collection_threshold:0.6",
    ];
    let mut args = vec![
        "tune",
        &trace_file("resnet18_default.pickle")[..],
        "--capacity",
        "2 GiB",
        "--out",
        out.to_str().unwrap(),
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    for g in grid {
        args.extend(["--grid".to_string(), g.to_string()]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = vramlab(&argv, tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if Command::new("bash").arg("-c").arg("true").status().is_err() {
        eprintln!("skipped: no bash on this machine to paste the lines into");
        return;
    }
    // The table's last column: each cell, after PYTORCH_ALLOC_CONF=, reads back as its setting.
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("rank"))
        .skip(1)
        .take(grid.len())
        .collect();
    let mut seen = Vec::new();
    for row in &rows {
        let cell = row.rsplit("  ").next().unwrap().trim();
        if cell == "(defaults)" {
            seen.push(String::new());
            continue;
        }
        seen.push(pasted(&format!("PYTORCH_ALLOC_CONF={cell}"), tmp.path()).unwrap());
    }
    seen.sort();
    let mut want: Vec<String> = grid.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(seen, want, "{text}");
    // The JSON's line to paste, and every line of the text that offers a setting.
    let json = vramlab(&[&argv[..], &["--json"]].concat(), tmp.path());
    assert!(json.status.success(), "{}", stderr(&json));
    let record: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    for result in record["results"].as_array().unwrap() {
        let policy = result["policy"].as_str().unwrap();
        let setting = policy.strip_prefix("PYTORCH_ALLOC_CONF=").unwrap();
        assert_eq!(pasted(result["paste"].as_str().unwrap(), tmp.path()).unwrap(), setting);
    }
    let html = std::fs::read_to_string(out.join("tune.html")).unwrap();
    for line in text.lines().chain(html.lines()) {
        let line = line
            .replace("&#39;", "'")
            .replace("&gt;", ">")
            .replace("&lt;", "<")
            .replace("&amp;", "&");
        for (i, _) in line.match_indices("PYTORCH_ALLOC_CONF='") {
            let rest = &line[i + "PYTORCH_ALLOC_CONF='".len()..];
            let quoted = &rest[..rest.find('\'').unwrap()];
            assert!(grid.contains(&quoted), "{line}");
            let offered = format!("PYTORCH_ALLOC_CONF='{quoted}'");
            assert_eq!(pasted(&offered, tmp.path()).unwrap(), quoted);
        }
    }
    assert!(text.contains(&format!("'{awkward}'")), "{text}");
    assert!(!tmp.path().join(":1]").exists());
}

/// Issue 38, item 5: tune ends on one line that answers, in each of its three cases, and
/// tune.html's box says a failure in a failure's colour and words.
#[test]
fn tune_ends_on_one_line_that_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = trace_file("resnet18_default.pickle");
    let grid = [
        "",
        "expandable_segments:True",
        "roundup_power2_divisions:[64:8,256:4,1024:2,>:1]",
    ];
    for (cap, starts, html_class, html_words) in [
        ("2 GiB", "answer: your current settings (PyTorch's defaults) already fit under the cap of 2,048 MiB, with ", "class=\"answer\"", "Your current settings already fit"),
        ("1600 MiB", "answer: PYTORCH_ALLOC_CONF='expandable_segments:True' fits under the cap of 1,600 MiB", "class=\"answer\"", "Set it in the job&#39;s environment"),
        ("1000 MiB", "answer: nothing fits under the cap of 1,000 MiB: the smallest cap is 1,588 MiB, with PYTORCH_ALLOC_CONF='expandable_segments:True'", "class=\"answer failure\"", "Nothing fits under the cap of 1,000 MiB"),
    ] {
        let out = tmp.path().join(cap.replace(' ', ""));
        let mut args = vec!["tune", &trace[..], "--capacity", cap, "--out", out.to_str().unwrap()];
        for g in &grid {
            args.extend(["--grid", g]);
        }
        let output = vramlab(&args, tmp.path());
        assert!(output.status.success(), "{}", stderr(&output));
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let last = text.trim_end().lines().last().unwrap();
        assert!(last.starts_with(starts), "{cap}: the last line is\n{last}");
        let html = std::fs::read_to_string(out.join("tune.html")).unwrap().replace('\'', "&#39;");
        assert!(html.contains(html_class) && html.contains(html_words), "{cap}: {html}");
        if cap == "1000 MiB" {
            assert!(!html.contains("Set it in the job"), "nothing fits, yet tune.html says to set it");
            assert!(!html.contains("class=\"answer\""));
        }
    }
}

#[test]
fn perfetto_export_of_resnet18_follows_the_trace_event_format() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("resnet18.json");
    let output = vramlab(
        &[
            "replay",
            &trace_file("resnet18_default.pickle"),
            "--policy",
            "caching,expandable",
            "--export",
            "perfetto",
            file.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let events = doc["traceEvents"]
        .as_array()
        .expect("the JSON Object Format: a traceEvents array");
    let mut names = std::collections::BTreeMap::new();
    let mut last_counter_ts = std::collections::BTreeMap::new();
    let (mut counters, mut instants) = (0, 0);
    let mut annotations = std::collections::BTreeMap::new();
    for e in events {
        let ph = e["ph"].as_str().expect("every event has a phase");
        let pid = e["pid"].as_u64().expect("every event has an integer pid");
        match ph {
            "M" => {
                assert!(["process_name", "process_sort_index"].contains(&e["name"].as_str().unwrap()));
                if e["name"] == "process_name" {
                    names.insert(pid, e["args"]["name"].as_str().unwrap().to_string());
                }
            }
            "C" => {
                counters += 1;
                let ts = e["ts"].as_u64().expect("counters have a numeric ts");
                let args = e["args"].as_object().expect("counter values are args");
                assert!(args.values().all(|v| v.is_u64()), "{e}");
                assert!(args["allocated"].as_u64() <= args["reserved"].as_u64(), "{e}");
                let last = last_counter_ts.insert(pid, ts);
                assert!(last.is_none_or(|l| l <= ts), "counter time goes forward: {e}");
            }
            // The phases the program marked (issue 37): resnet18's recording marks each
            // optimizer step and zero_grad (`external_annotations`).
            "i" if e["cat"] == "annotation" => {
                *annotations.entry(pid).or_insert(0) += 1;
                let stage = e["args"]["stage"].as_str().unwrap();
                assert!(["START", "END"].contains(&stage), "{e}");
                let name = e["name"].as_str().unwrap();
                assert_eq!(name, format!("{stage} {}", e["args"]["annotation"].as_str().unwrap()));
                assert!(name.contains("Optimizer."), "{e}");
                assert!(e["ts"].is_u64() && e["args"]["time_us"].is_u64(), "{e}");
            }
            "i" => {
                instants += 1;
                assert!(["g", "p", "t"].contains(&e["s"].as_str().unwrap()), "{e}");
                assert!(e["ts"].is_u64() && e["args"]["bytes"].is_u64(), "{e}");
                let name = e["name"].as_str().unwrap();
                assert!(
                    [
                        "segment_alloc",
                        "segment_free",
                        "segment_map",
                        "segment_unmap",
                        "retry",
                        "oom"
                    ]
                    .contains(&name),
                    "{name}"
                );
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    assert_eq!(names.values().collect::<Vec<_>>(), ["caching", "expandable"]);
    assert!(
        counters > 1000 && instants > 60,
        "{counters} counters, {instants} instants"
    );
    // Every one of the 160 marks, in each policy's process.
    assert_eq!(annotations.into_values().collect::<Vec<_>>(), [160, 160]);
}

#[test]
fn snapshot_export_reads_back_and_replays_to_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("whatif.pickle");
    let output = vramlab(
        &[
            "replay",
            &recording("gpt/default.pickle.gz"),
            "--alloc-conf",
            "expandable_segments:True",
            "--export",
            "snapshot",
            file.to_str().unwrap(),
            "--json",
        ],
        tmp.path(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let first: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // The export is a snapshot recorded under those settings: replayed, it checks itself.
    let again = vramlab(&["replay", file.to_str().unwrap(), "--json"], tmp.path());
    assert!(again.status.success(), "{}", stderr(&again));
    let second: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let result = &second["results"][0];
    assert_eq!(result["policy"], "PYTORCH_ALLOC_CONF=expandable_segments:True");
    assert_eq!(result["recorded_check"]["verdict"], "match", "{result}");
    assert_eq!(result["pytorch_stats"], first["results"][0]["pytorch_stats"]);
}

/// Issue 40: what a terminal shows of a replay carries no escape sequence or U+2028 from the
/// input: a snapshot's own notes and the file's name are escaped, in the table's notes and in
/// the warning line (both reached the terminal raw).
#[test]
fn notes_and_names_from_the_input_reach_the_terminal_escaped() {
    // pickle.dumps({'device_traces': [[alloc, free_requested, free_completed, free_completed
    // again of 512 B at 1 << 34]], 'vramlab_notes': ['evil \x1b[2J\u2028 note']}, protocol=2)
    let bytes: &[u8] = b"\x80\x02}q\x00(X\r\x00\x00\x00device_tracesq\x01]q\x02]q\x03(}q\x04(X\x06\x00\x00\x00actionq\x05X\x05\x00\x00\x00allocq\x06X\x04\x00\x00\x00addrq\x07\x8a\x05\x00\x00\x00\x00\x04X\x04\x00\x00\x00sizeq\x08M\x00\x02X\x06\x00\x00\x00streamq\tK\x00u}q\n(h\x05X\x0e\x00\x00\x00free_requestedq\x0bh\x07\x8a\x05\x00\x00\x00\x00\x04h\x08M\x00\x02h\tK\x00u}q\x0c(h\x05X\x0e\x00\x00\x00free_completedq\rh\x07\x8a\x05\x00\x00\x00\x00\x04h\x08M\x00\x02h\tK\x00u}q\x0e(h\x05h\rh\x07\x8a\x05\x00\x00\x00\x00\x04h\x08M\x00\x02h\tK\x00ueaX\r\x00\x00\x00vramlab_notesq\x0f]q\x10X\x11\x00\x00\x00evil \x1b[2J\xe2\x80\xa8 noteq\x11au.";
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("x\u{2028}y.pickle");
    std::fs::write(&file, bytes).unwrap();
    for command in ["replay", "tune"] {
        let output = vramlab(&[command, file.to_str().unwrap(), "--out", "o"], tmp.path());
        assert!(output.status.success(), "{}", stderr(&output));
        let all = format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
        assert!(!all.contains('\u{1b}') && !all.contains('\u{2028}'), "{all}");
        assert!(all.contains("note: evil \\u{1b}[2J\\u{2028} note"), "{all}");
        if command == "replay" {
            assert!(all.contains("x\\u{2028}y.pickle skipped or contradicting"), "{all}");
        }
    }
}

/// Issue 40: an RMM log whose every row is skipped (an action it does not know, here with a
/// U+2028 in it) says why the first was, escaped, where it said only 'no events'.
#[test]
fn a_log_whose_rows_are_all_skipped_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("odd.csv");
    std::fs::write(
        &log,
        "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.000001,alloc\u{2028}ate,0x1000,512,0x0\n",
    )
    .unwrap();
    let output = vramlab(&["replay", log.to_str().unwrap()], tmp.path());
    assert_clean_failure(
        &output,
        &["the trace has no events: its 1 records were all skipped; the first: line 2: unknown action 'alloc\\u{2028}ate'"],
    );
}

/// Issue 40: a replay under a cap that fails requests exports its out-of-memory errors with
/// the bytes the device had free (the cap less what was held), as PyTorch records them: the
/// export replays to the same figures under the cap it implies, whose bounds agree (a
/// `device_free` of 0 implied a cap of the bytes held, crossing the device allocations').
#[test]
fn snapshot_export_of_a_capped_replay_implies_its_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("capped.pickle");
    let trace = trace_file("resnet18_default.pickle");
    let output = vramlab(
        &[
            "replay",
            &trace,
            "--capacity",
            "200 MiB",
            "--export",
            "snapshot",
            file.to_str().unwrap(),
            "--json",
        ],
        tmp.path(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let first: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(first["results"][0]["failed_allocs"].as_u64().unwrap() > 0);
    let again = vramlab(&["replay", file.to_str().unwrap(), "--json"], tmp.path());
    assert!(again.status.success(), "{}", stderr(&again));
    let second: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let source = second["capacity_source"].as_str().unwrap();
    assert!(!source.contains("cross"), "{source}");
    assert_eq!(second["capacity_bytes"], 200u64 << 20);
    let result = &second["results"][0];
    assert_eq!(result["recorded_check"]["verdict"], "match", "{result}");
    assert_eq!(result["pytorch_stats"], first["results"][0]["pytorch_stats"]);
}

#[test]
fn experiment_names_never_steer_files_out_of_the_output_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    for (name, needle) in [
        ("../../x", "'../../x' starts with '.'"),
        ("a/b", "'a/b' holds '/'"),
        ("", "an empty name"),
        ("..", "starts with '.'"),
    ] {
        let text = SUITE.replace("mine_up", name).replace("SIZES", "4096");
        let path = work.join("evil.toml");
        std::fs::write(&path, text).unwrap();
        let output = vramlab(&["run", path.to_str().unwrap(), "--out", "o"], &work);
        assert_clean_failure(&output, &["evil.toml:", needle]);
    }
    // A record whose experiment field holds a path: `report` refuses it instead of writing there.
    let out = work.join("o");
    let good = vramlab(&["run", &suite_file(&work, "4096"), "--out", "o"], &work);
    assert!(good.status.success(), "{}", stderr(&good));
    let record = out.join("mine_up/sim.json");
    let text = std::fs::read_to_string(&record)
        .unwrap()
        .replace("\"mine_up\"", "\"../../escaped\"");
    std::fs::write(&record, text).unwrap();
    let output = vramlab(&["report", "o"], &work);
    assert_clean_failure(&output, &["sim.json", "'../../escaped'"]);
    let outside: Vec<PathBuf> = files_under(tmp.path())
        .into_iter()
        .filter(|p| !p.starts_with(&work))
        .collect();
    assert!(outside.is_empty(), "written outside the work folder: {outside:?}");
}

#[test]
fn bad_inputs_from_the_issue_get_one_line_or_a_correct_result() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Inputs refused in one line, exit 1.
    for (args, needle) in [
        (
            vec!["replay", "/dev/zero"],
            "/dev/zero: is a device; vramlab reads regular files",
        ),
        (
            vec!["replay", "synthetic:training-loop:steps=1000000000000"],
            "steps = 1000000000000: must lie in 1..=1000000",
        ),
        (
            vec!["replay", "synthetic:training-loop:steps=1000000:layers=10000"],
            "more than the 10000000 events a generator makes by default",
        ),
        (
            vec!["replay", "synthetic:log-uniform:count=5:count=6"],
            "count is given twice",
        ),
        (
            vec![
                "replay",
                "synthetic:log-uniform",
                "--policy",
                "best-fit:alignment=512:alignment=256",
            ],
            "alignment is given twice",
        ),
        (
            vec!["replay", "synthetic:log-uniform", "--policy", "slab"],
            "valid policies:",
        ),
        (
            vec!["replay", "synthetic:log-uniform", "--capacity", "-1"],
            "--capacity",
        ),
        (
            vec!["explain", "occupancy", "threads=256", "threads=128"],
            "threads is given twice",
        ),
    ] {
        let output = vramlab(&args, dir);
        assert_clean_failure(&output, &[needle]);
    }
    // A request of 2^64 - 1 bytes among live blocks, from an RMM log with a byte-order mark:
    // counted as one failed request by every policy, the rest replayed.
    let csv = "\u{feff}Thread,Time,Action,Pointer,Size,Stream\n\
               1,10:00:00.000001,allocate,0x1000,4096,0x0\n\
               1,10:00:00.000002,allocate,0x2000,18446744073709551615,0x0\n\
               1,10:00:00.000003,allocate,0x3000,1048576,0x0\n\
               1,10:00:00.000004,free,0x1000,4096,0x0\n";
    std::fs::write(dir.join("huge.csv"), csv).unwrap();
    let output = vramlab(&["replay", "huge.csv", "--policy", "all", "--json"], dir);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for result in json["results"].as_array().unwrap() {
        assert_eq!(result["failed_allocs"], 1, "{}", result["policy"]);
    }
}

#[test]
fn a_reader_that_stops_reading_is_not_an_error() {
    // The read end is closed before the listing is written, as `vramlab list | head -0` does.
    for args in [&["list"][..], &["explain", "coalescing", "width=4", "stride=8"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vramlab"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stderr.is_empty(),
            "{args:?}: {:?} {stderr}",
            output.status
        );
    }
}

/// Output never escapes --out through a link, never replaces a special file, and no path is
/// named for two outputs; each refused with one line before anything is lost (issue 22).
#[test]
fn output_goes_only_where_it_may() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = recording("serve/default.pickle.gz");
    // A symlinked folder inside --out receives nothing.
    let out = tmp.path().join("out");
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.join("plots")).unwrap();
    let output = vramlab(&["replay", &trace, "--out", "out"], tmp.path());
    assert_clean_failure(&output, &["a symbolic link inside the output folder"]);
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    // A FIFO named as an export target stays a FIFO.
    let fifo = tmp.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let output = vramlab(
        &["replay", &trace, "--out", "o2", "--export", "perfetto", "fifo"],
        tmp.path(),
    );
    assert_clean_failure(&output, &["fifo: is a FIFO"]);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    // An empty name, and one path for two outputs, are refused before the replay runs.
    let output = vramlab(
        &["replay", &trace, "--out", "o3", "--export", "snapshot", ""],
        tmp.path(),
    );
    assert_clean_failure(&output, &["not a file name"]);
    let output = vramlab(
        &[
            "replay",
            &trace,
            "--out",
            "o4",
            "--save-trace",
            "x.json",
            "--export",
            "perfetto",
            "./x.json",
        ],
        tmp.path(),
    );
    assert_clean_failure(&output, &["named for two outputs"]);
    assert!(!tmp.path().join("o4").exists(), "nothing written before the refusal");
}

/// A second run into the same folder reports only what it made, and says what it left out.
#[test]
fn a_run_into_a_used_folder_reports_only_its_own_records() {
    let dir = tempfile::tempdir().unwrap();
    assert!(vramlab(&["run", "banks", "--out", "out"], dir.path()).status.success());
    let second = vramlab(&["run", "occupancy", "--out", "out"], dir.path());
    assert!(second.status.success(), "{}", stderr(&second));
    let note = stderr(&second);
    assert!(
        note.contains("records of 1 experiments this run did not make (banks)") && note.contains("vramlab report"),
        "{note}"
    );
    let report = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    assert!(report.contains("occupancy") && !report.contains("## banks"), "{report}");
    // The records stay; `report` renders the whole folder.
    assert!(vramlab(&["report", "out"], dir.path()).status.success());
    let all = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    assert!(all.contains("## banks"), "the full report lacks banks");
}

/// Small things a new user trips over: a near-miss name gets a suggestion, and the figures file
/// committed beside a snapshot is told apart from a trace.
#[test]
fn near_misses_are_answered_helpfully() {
    let dir = tempfile::tempdir().unwrap();
    let output = vramlab(&["run", "transfer", "--out", "out"], dir.path());
    let err = assert_clean_failure(&output, &["(did you mean 'transfers'?)"]);
    assert_eq!(
        err.matches(" growth,").count() + err.matches(" growth\n").count(),
        1,
        "{err}"
    );
    let figures = trace_file("resnet18_default.json");
    let output = vramlab(&["replay", &figures, "--out", "out"], dir.path());
    assert_clean_failure(&output, &["not a vramlab trace", "alloc_conf"]);
}

/// The data a teaching page embeds (`<script type="application/json" id="teach-data">`).
fn teach_data(page: &Path) -> serde_json::Value {
    let html = std::fs::read_to_string(page).unwrap();
    let start = html.find("id=\"teach-data\">").expect("the page's data") + "id=\"teach-data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end].replace("<\\/", "</")).unwrap()
}

/// The peak figures every step of an allocator page shows, by fact key.
fn teach_peaks(page: &Path) -> Vec<(String, String)> {
    let data = teach_data(page);
    let views = data["allocator"]["views"].as_object().unwrap();
    assert!(views.len() > 100, "{} steps", views.len());
    let mut peaks: Vec<(String, String)> = Vec::new();
    for view in views.values() {
        for fact in view["facts"].as_array().unwrap() {
            let key = fact["key"].as_str().unwrap();
            if key.contains("peak") {
                let pair = (key.to_string(), fact["value"].as_str().unwrap().to_string());
                if !peaks.contains(&pair) {
                    peaks.push(pair);
                }
            }
        }
    }
    peaks
}

/// `vramlab replay TRACE` under the teaching page's two settings: each peak's fact key and the
/// bytes it must show, and the trace's event count.
fn replay_peaks(trace: &str, dir: &Path) -> (Vec<(String, String)>, u64) {
    let replay = vramlab(
        &[
            "replay",
            trace,
            "--alloc-conf",
            "",
            "--alloc-conf",
            "expandable_segments:True",
            "--json",
            "--out",
            "r",
        ],
        dir,
    );
    assert!(replay.status.success(), "{}", stderr(&replay));
    let json: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    let results = json["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let mut expected = Vec::new();
    for (key, result) in ["defaults", "expandable"].iter().zip(results) {
        for figure in ["reserved", "allocated"] {
            let bytes = result[format!("peak_{figure}_bytes")].as_u64().unwrap();
            expected.push((format!("{key}_peak_{figure}"), format!("({bytes} bytes)")));
        }
    }
    (expected, json["events"].as_u64().unwrap())
}

/// The allocator page at `page` shows exactly the peaks `expected`, on every step.
fn assert_same_peaks(page: &Path, expected: &[(String, String)]) {
    let peaks = teach_peaks(page);
    // One value per figure over every step, and it is replay's.
    assert_eq!(peaks.len(), expected.len(), "{peaks:?}");
    for (key, bytes) in expected {
        assert!(
            peaks.iter().any(|(k, v)| k == key && v.ends_with(bytes.as_str())),
            "{key} {bytes} not in {peaks:?}"
        );
    }
}

#[test]
fn teach_shows_the_peaks_vramlab_replay_prints_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["teach", "--out", "site"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("8 pages"));
    let (expected, _) = replay_peaks(&trace_file("resnet18_default.pickle"), tmp.path());
    assert_same_peaks(&tmp.path().join("site/allocator.html"), &expected);
    // The settings differ on this trace: expandable segments reserve less.
    assert_ne!(expected[0].1, expected[2].1, "defaults and expandable reserve alike");

    // A snapshot of the user's replaces the committed one, with its own replay's peaks.
    let other = trace_file("resnet18_expandable.pickle");
    let output = vramlab(&["teach", "--out", "mine", "--snapshot", &other], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let page = tmp.path().join("mine/allocator.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("resnet18_expandable.pickle") && !html.contains("resnet18_default.pickle"));
    let (expected, events) = replay_peaks(&other, tmp.path());
    assert_same_peaks(&page, &expected);
    assert!(html.contains(&format!("The trace has {events} events")));
}

#[test]
fn run_writes_the_teaching_site_and_never_through_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["run", "latency", "--out", "o"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(tmp.path().join("o/teach/index.html").is_file());
    assert!(tmp.path().join("o/teach/allocator.html").is_file());
    // A link where the site goes: the run's records stand, the site is refused in one line.
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(tmp.path().join("p")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, tmp.path().join("p/teach")).unwrap();
    let output = vramlab(&["run", "latency", "--out", "p"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("teaching site not written") && stderr(&output).contains("symbolic link"));
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing written through the link"
    );
    assert!(tmp.path().join("p/latency/sim.json").is_file());
}

/// Issue 40: a snapshot of one device with events and 100,000 empty ones answers in seconds
/// (each empty device once cost a page section and four plots, about 47 ms), and says the
/// empty devices in one line.
#[test]
fn a_snapshot_of_100000_empty_devices_answers_in_seconds() {
    fn str(out: &mut Vec<u8>, text: &str) {
        out.push(b'X');
        out.extend_from_slice(&(text.len() as u32).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    let mut bytes = vec![0x80, 2, b'}', b'('];
    str(&mut bytes, "segments");
    bytes.push(b']');
    str(&mut bytes, "device_traces");
    bytes.extend_from_slice(b"](](");
    for action in ["segment_alloc", "alloc", "free_requested", "free_completed"] {
        bytes.extend_from_slice(b"}(");
        str(&mut bytes, "action");
        str(&mut bytes, action);
        for (key, value) in [
            ("addr", 1u32 << 30),
            ("size", if action == "segment_alloc" { 2 << 20 } else { 512 }),
            ("stream", 0),
        ] {
            str(&mut bytes, key);
            bytes.push(b'J');
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes.push(b'u');
    }
    bytes.push(b'e');
    bytes.extend(std::iter::repeat_n(b']', 100_000));
    bytes.extend_from_slice(b"eu.");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("many.pickle"), &bytes).unwrap();
    let started = std::time::Instant::now();
    let output = vramlab(&["replay", "many.pickle"], tmp.path());
    let took = started.elapsed();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(took.as_secs() < 30, "took {took:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("devices 1-100000 (100000) have no events in the snapshot"),
        "{text}"
    );
    let plots = files_under(&tmp.path().join("vramlab-out/replay/plots"));
    assert_eq!(plots.len(), 4, "the device with events only: {plots:?}");
}

/// Issue 38, item 6: a verdict whose answer under the cap reads as a contradiction of the caps
/// tune found (it fits below "the smallest cap that fits", fails above "fits at every cap
/// from", or fits at the cap but not at every cap above it, or fails at the cap though a
/// smaller one fits) says why in one sentence (`why`, also in the text); one that agrees says
/// nothing more. Under 540 MiB the committed GPT job's own settings fail, replayed at the
/// recording's addresses, though the search (a fresh process's placement) found them fitting
/// from 524 MiB; under 440 MiB garbage_collection_threshold:0.6 fits though 454 MiB fails.
#[test]
fn tune_explains_each_verdict_that_reads_as_a_contradiction() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/reference/h100/real-jobs");
    let mut explained = 0;
    for (job, cap) in [("gpt-full.pickle.gz", "540 MiB"), ("lstm-full.pickle.gz", "440 MiB")] {
        let trace = root.join(job);
        let out = tmp.path().join(job);
        let output = vramlab(
            &[
                "tune",
                trace.to_str().unwrap(),
                "--capacity",
                cap,
                "--json",
                "--out",
                out.to_str().unwrap(),
            ],
            tmp.path(),
        );
        assert!(output.status.success(), "{}", stderr(&output));
        let record: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let limit = record["capacity_bytes"].as_u64().unwrap();
        for (verdict, result) in record["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .zip(record["results"].as_array().unwrap())
        {
            let fits = verdict["fits_at_cap"].as_bool().unwrap();
            assert_eq!(fits, result["failed_allocs"].as_u64() == Some(0));
            let (Some(min), Some(always)) = (
                verdict["min_capacity_bytes"].as_u64(),
                verdict["always_fits_bytes"].as_u64(),
            ) else {
                continue;
            };
            let reads_as_contradiction =
                (fits && (limit < min || limit < always)) || (!fits && (limit >= always || min <= limit));
            let text = verdict["text"].as_str().unwrap();
            match verdict["why"].as_str() {
                Some(why) => {
                    assert!(
                        reads_as_contradiction,
                        "{job}: explained though nothing contradicts: {text}"
                    );
                    assert!(text.ends_with(why) && why.ends_with('.'), "{job}: {text}");
                    assert_eq!(why.matches(". ").count(), 0, "{job}: one sentence: {why}");
                    explained += 1;
                }
                None => assert!(!reads_as_contradiction, "{job} under {cap}: unexplained: {text}"),
            }
        }
        let terminal = std::fs::read_to_string(out.join("tune.md")).unwrap();
        assert!(
            terminal.contains("Why: garbage_collection_threshold") || job != "lstm-full.pickle.gz",
            "{terminal}"
        );
        if job == "gpt-full.pickle.gz" {
            assert!(terminal.contains("at the recording's addresses"), "{terminal}");
        }
    }
    assert!(explained >= 3, "{explained} verdicts explained");
}

/// A reader that stops early closes the pipe: vramlab stops quietly, as Unix tools do, without
/// a panic.
#[test]
fn a_closed_pipe_ends_the_output_without_a_panic() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces/resnet18_default.pickle");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vramlab"))
        .args(["tune", trace.to_str().unwrap(), "--json", "--out"])
        .arg(dir.path().join("out"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(output.status.code(), Some(101), "{stderr}");
}

/// Issue 40: two vramlab processes writing one `--out` folder at once mixed their records and
/// reports (each rendered the folder as the other left it). While one holds the folder, the
/// other is refused in one line, and nothing it would write appears; once let go, it runs.
#[test]
fn a_second_vramlab_writing_the_same_out_folder_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/reference/h100/real-jobs/two-streams.pickle.gz");
    let trace = trace.to_str().unwrap();
    let out = tmp.path().join("shared");
    std::fs::create_dir_all(&out).unwrap();
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(out.join(".vramlab.lock"))
        .unwrap();
    lock.lock().unwrap();
    for args in [
        vec!["replay", trace, "--out", "shared", "--alloc-conf="],
        vec!["tune", trace, "--out", "shared", "--grid", "expandable_segments:True"],
        vec!["run", "transfers", "--out", "shared"],
        vec!["report", "shared"],
    ] {
        let output = vramlab(&args, tmp.path());
        assert_clean_failure(&output, &["shared", "another vramlab is writing into this folder"]);
    }
    assert_eq!(files_under(&out), vec![out.join(".vramlab.lock")], "nothing written");
    drop(lock);
    let output = vramlab(&["replay", trace, "--out", "shared", "--alloc-conf="], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Issue 40: `report` holds every record of its folder; each is bounded, and so are all of them
/// together (a folder of thousands of records each within the limit is refused in one line).
#[test]
fn a_report_folder_past_the_values_limit_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let output = vramlab(&["run", "transfers", "--out", "o"], tmp.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let per_record: Vec<u64> = files_under(&tmp.path().join("o"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "sim.json"))
        .map(|p| {
            let record: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
            record["points"]
                .as_array()
                .unwrap()
                .iter()
                .map(|point| {
                    (point["params"].as_object().unwrap().len() + point["metrics"].as_object().unwrap().len()) as u64
                })
                .sum()
        })
        .collect();
    assert!(per_record.len() >= 2, "{per_record:?}");
    let most = per_record.iter().max().unwrap().to_string();
    let report = |limit: &str| {
        Command::new(env!("CARGO_BIN_EXE_vramlab"))
            .args(["report", "o"])
            .env("VRAMLAB_MAX_RECORD_VALUES", limit)
            .current_dir(tmp.path())
            .output()
            .unwrap()
    };
    let output = report(&most);
    assert_clean_failure(&output, &["o: the records hold more than", "VRAMLAB_MAX_RECORD_VALUES"]);
    let all: u64 = per_record.iter().sum();
    let output = report(&all.to_string());
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Issue 38 item 10: one name for the GPU across commands: `--gpu` in run, explain and teach as
/// in trace, replay and tune; `--profile`, the former name, still works and is not offered.
#[test]
fn the_gpu_is_named_gpu_everywhere_and_profile_still_works() {
    let tmp = tempfile::tempdir().unwrap();
    let by_gpu = vramlab(&["explain", "banks", "stride=2", "--gpu", "h200"], tmp.path());
    let by_profile = vramlab(&["explain", "banks", "stride=2", "--profile", "h200"], tmp.path());
    assert!(by_gpu.status.success(), "{}", stderr(&by_gpu));
    assert_eq!(by_gpu.stdout, by_profile.stdout);
    assert!(String::from_utf8_lossy(&by_gpu.stdout).contains("H200"));
    for command in ["run", "explain", "teach", "replay", "tune"] {
        let help = vramlab(&[command, "--help"], tmp.path());
        let text = String::from_utf8_lossy(&help.stdout);
        assert!(text.contains("--gpu"), "{command}: {text}");
        // Named in --gpu's help as its former name, never offered as an option of its own.
        assert!(
            !text.contains("--profile <"),
            "{command} still offers --profile: {text}"
        );
    }
}
