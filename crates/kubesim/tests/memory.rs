//! Memory of one in-process server (issue #13: `courier bench --idle-workers 1000` hosts a thousand
//! worker servers in one process). Each server's own state must stay small: what every server
//! shares (schemas, OpenAPI, discovery) is built once per process, and per-table buffers are sized
//! for the traffic, not for the worst burst. Its own test binary, so no other test's allocations
//! run in between.

use kubesim::{Role, Sim, SimOptions};

const SERVERS: usize = 20;
/// What an idle worker server may cost (resident). Was about 26 MB before the watch buffers were
/// bounded by traffic (issue #13).
const BUDGET_PER_SERVER: u64 = 5 * 1024 * 1024;

/// VmRSS of this process.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_server_costs_a_few_megabytes() {
    if !std::path::Path::new("/proc/self/status").exists() {
        return; // Linux only.
    }
    let start = |i: usize| {
        Sim::start(SimOptions {
            name: format!("w{i}"),
            role: Role::Worker,
            ..SimOptions::default()
        })
    };
    // The first server builds what every server shares.
    let first = start(0).await.unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let before = resident();
    let mut sims = Vec::new();
    for i in 1..=SERVERS {
        sims.push(start(i).await.unwrap_or_else(|e| panic!("{e}")));
    }
    // Let their controllers subscribe to what they follow.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let per_server = resident().saturating_sub(before) / SERVERS as u64;
    println!("{} KiB per idle worker server", per_server / 1024);
    assert!(
        per_server <= BUDGET_PER_SERVER,
        "{} KiB per idle worker server (budget {} KiB)",
        per_server / 1024,
        BUDGET_PER_SERVER / 1024
    );
    for s in sims.iter().chain([&first]) {
        s.shutdown();
    }
}
