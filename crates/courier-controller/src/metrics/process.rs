//! The standard process metrics (`process_cpu_seconds_total`, `process_resident_memory_bytes`, ...),
//! read from `/proc` at scrape time. Linux only: elsewhere the reads fail and the families are empty,
//! so `/metrics` leaves them out.
//!
//! Why not the `prometheus` crate's `process` feature: it pulls `procfs` and its dependencies for
//! six numbers from three files; reading them here adds no crate, and [`ProcStat`] also serves
//! `courier bench`, which reads the same files of a child process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};

/// Why `/proc` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("reading {path}: {source} (process metrics need Linux /proc)")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("unexpected content in {path}")]
    Format { path: PathBuf },
}

/// One reading of a process's `/proc/<pid>/{stat,status}`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcStat {
    /// User plus system CPU time.
    pub cpu_seconds: f64,
    /// When the process started, in seconds since the Unix epoch (`None` without `/proc/stat`).
    pub start_time_seconds: Option<f64>,
    /// `VmRSS`: resident now.
    pub resident_bytes: u64,
    /// `VmHWM`: the peak resident size so far.
    pub peak_resident_bytes: u64,
    /// `VmSize`: the virtual memory size.
    pub virtual_bytes: u64,
}

/// The fields of `/proc/<pid>/stat` used here, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatFields {
    utime: u64,
    stime: u64,
    starttime: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) may hold spaces and parentheses, so
/// fields are counted after its last `)`: there the state is field 3, hence utime (14), stime (15)
/// and starttime (22) sit at indexes 11, 12 and 19.
fn parse_stat(text: &str) -> Option<StatFields> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let at = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some(StatFields {
        utime: at(11)?,
        stime: at(12)?,
        starttime: at(19)?,
    })
}

/// A `Key:   123 kB` line of `/proc/<pid>/status`, in bytes.
fn status_bytes(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// `btime` of `/proc/stat`: the boot time in seconds since the epoch.
fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of `Max open files` in `/proc/<pid>/limits` (`None` when unlimited).
fn parse_max_fds(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    soft.parse().ok()
}

#[cfg(target_os = "linux")]
fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // 100 is USER_HZ on every architecture Courier builds for.
    if t > 0 { t as f64 } else { 100.0 }
}

/// Without Linux there is no /proc to read: [`ProcStat::read`] fails before this matters.
#[cfg(not(target_os = "linux"))]
fn clock_ticks_per_second() -> f64 {
    100.0
}

fn proc_dir(pid: Option<u32>) -> PathBuf {
    match pid {
        Some(p) => PathBuf::from(format!("/proc/{p}")),
        None => PathBuf::from("/proc/self"),
    }
}

fn read(path: &Path) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|source| ProcError::Read {
        path: path.to_path_buf(),
        source,
    })
}

impl ProcStat {
    /// Reads process `pid` (`None`: this process).
    pub fn read(pid: Option<u32>) -> Result<Self, ProcError> {
        let dir = proc_dir(pid);
        let stat_path = dir.join("stat");
        let stat = parse_stat(&read(&stat_path)?).ok_or(ProcError::Format { path: stat_path })?;
        let status_path = dir.join("status");
        let status = read(&status_path)?;
        let field = |key: &str| {
            status_bytes(&status, key).ok_or_else(|| ProcError::Format {
                path: status_path.clone(),
            })
        };
        let tick = clock_ticks_per_second();
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_boot_time(&t));
        Ok(Self {
            cpu_seconds: (stat.utime + stat.stime) as f64 / tick,
            start_time_seconds: boot.map(|b| b as f64 + stat.starttime as f64 / tick),
            resident_bytes: field("VmRSS")?,
            peak_resident_bytes: field("VmHWM")?,
            virtual_bytes: field("VmSize")?,
        })
    }
}

/// Open file descriptors of this process (the entries of `/proc/self/fd`).
pub fn open_fds() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    u64::try_from(entries.count()).ok()
}

/// The soft limit on open file descriptors of this process.
pub fn max_fds() -> Option<u64> {
    parse_max_fds(&std::fs::read_to_string("/proc/self/limits").ok()?)
}

/// (name, help, type) of each family, in the order [`ProcessCollector::collect`] reports them.
const FAMILIES: [(&str, &str, MetricType); 6] = [
    (
        "process_cpu_seconds_total",
        "Total user and system CPU time spent in seconds.",
        MetricType::COUNTER,
    ),
    (
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        MetricType::GAUGE,
    ),
    (
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes.",
        MetricType::GAUGE,
    ),
    (
        "process_open_fds",
        "Number of open file descriptors.",
        MetricType::GAUGE,
    ),
    (
        "process_max_fds",
        "Maximum number of open file descriptors.",
        MetricType::GAUGE,
    ),
    (
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        MetricType::GAUGE,
    ),
];

/// This process's metrics, read at each scrape.
#[derive(Clone)]
pub struct ProcessCollector {
    descs: Vec<Desc>,
}

impl ProcessCollector {
    pub fn new() -> Self {
        let descs = FAMILIES
            .iter()
            .map(|(name, help, _)| {
                Desc::new(
                    (*name).to_string(),
                    (*help).to_string(),
                    Vec::new(),
                    HashMap::new(),
                )
                .unwrap_or_else(|e| panic!("metric {name} is malformed: {e}"))
            })
            .collect();
        Self { descs }
    }
}

impl Default for ProcessCollector {
    fn default() -> Self {
        Self::new()
    }
}

/// One family with a single unlabelled sample, or none when `value` could not be read.
fn family(name: &str, help: &str, kind: MetricType, value: Option<f64>) -> MetricFamily {
    let mut mf = MetricFamily::default();
    mf.set_name(name.to_string());
    mf.set_help(help.to_string());
    mf.set_field_type(kind);
    if let Some(v) = value {
        let mut m = proto::Metric::default();
        if kind == MetricType::COUNTER {
            let mut c = proto::Counter::default();
            c.set_value(v);
            m.set_counter(c);
        } else {
            let mut g = proto::Gauge::default();
            g.set_value(v);
            m.set_gauge(g);
        }
        mf.set_metric(vec![m]);
    }
    mf
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let stat = ProcStat::read(None).ok();
        let values = [
            stat.map(|s| s.cpu_seconds),
            stat.map(|s| s.resident_bytes as f64),
            stat.map(|s| s.virtual_bytes as f64),
            open_fds().map(|n| n as f64),
            max_fds().map(|n| n as f64),
            stat.and_then(|s| s.start_time_seconds),
        ];
        FAMILIES
            .iter()
            .zip(values)
            .map(|((name, help, kind), v)| family(name, help, *kind, v))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with spaces and a ')' of its own (recorded format, fields 1-24).
        let text = "4242 (courier (run) x) S 1 4242 4242 0 -1 4194560 5000 0 0 0 \
                    731 112 0 0 20 0 9 0 86523 1567866880 7001 18446744073709551615";
        assert_eq!(
            parse_stat(text),
            Some(StatFields {
                utime: 731,
                stime: 112,
                starttime: 86523
            })
        );
        assert_eq!(parse_stat("4242 (courier) S 1 2"), None, "truncated");
    }

    #[test]
    fn status_limits_and_boot_time_parse() {
        let status =
            "Name:\tcourier\nVmHWM:\t   40960 kB\nVmRSS:\t   20480 kB\nVmSize:\t 1531120 kB\n";
        assert_eq!(status_bytes(status, "VmRSS"), Some(20480 * 1024));
        assert_eq!(status_bytes(status, "VmHWM"), Some(40960 * 1024));
        assert_eq!(status_bytes(status, "VmSize"), Some(1531120 * 1024));
        assert_eq!(status_bytes(status, "VmSwap"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1048576              1048576              files     \n";
        assert_eq!(parse_max_fds(limits), Some(1048576));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_fds(unlimited), None);
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1767225600\nprocesses 9\n"),
            Some(1767225600)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads_and_every_family_has_a_sample() {
        let s = ProcStat::read(None).unwrap_or_else(|e| panic!("{e}"));
        assert!(s.resident_bytes > 0 && s.virtual_bytes >= s.resident_bytes);
        assert!(s.peak_resident_bytes >= s.resident_bytes);
        let started = s.start_time_seconds.unwrap_or_default();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        // Started within the last day and not in the future (clock ticks are coarse: 2 s slack).
        assert!(
            started > now - 86_400.0 && started < now + 2.0,
            "{started} vs {now}"
        );
        let families = ProcessCollector::new().collect();
        assert_eq!(families.len(), FAMILIES.len());
        for f in &families {
            assert_eq!(f.get_metric().len(), 1, "{} has a sample", f.name());
        }
        let fds = open_fds().unwrap_or_default();
        assert!(fds >= 3 && max_fds().is_none_or(|m| m >= fds), "{fds}");
    }
}
