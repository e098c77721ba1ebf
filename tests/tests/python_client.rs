//! End to end with the official Python client (PyPI `kubernetes`, in the venv that
//! scripts/deps.sh creates): tests/python/client_test.py against the real server.

use std::process::Command;

use k1s_tests::{API_ONLY, Cluster, missing, test_tools};

#[test]
fn the_official_python_client_works() {
    let python = test_tools().join("pyvenv/bin/python");
    if !python.is_file() {
        missing("the Python kubernetes client venv");
        return;
    }
    let Some(c) = Cluster::start(API_ONLY) else {
        return;
    };
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/client_test.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&c.kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "client_test.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all checks passed"));
}
