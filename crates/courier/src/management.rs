//! The one set of management-cluster flags every client command takes, with kubectl's meanings:
//! `--kubeconfig`, `--context`, `-n/--namespace` (default: the context's namespace), plus Courier's
//! own namespace (`--courier-namespace`, where the worker kubeconfig Secrets live). Old spellings
//! (`--management-kubeconfig`, `--management-context`) still work, with a warning.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use courier_api::DEFAULT_NAMESPACE;
use kube::Client;

use crate::util;

/// Read when neither `--kubeconfig` nor its old spelling is given (before `$KUBECONFIG`).
pub const MANAGEMENT_KUBECONFIG_ENV: &str = "COURIER_MANAGEMENT_KUBECONFIG";

/// How a client command reaches the management cluster.
#[derive(Args, Debug, Clone, Default)]
pub struct ManagementArgs {
    /// Kubeconfig of the management cluster [default: $COURIER_MANAGEMENT_KUBECONFIG, $KUBECONFIG,
    /// ~/.kube/config, then the pod's service account].
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the management kubeconfig [default: its current-context].
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace in the management cluster [default: the context's namespace, else `default`].
    #[arg(long, short = 'n', global = true)]
    pub namespace: Option<String>,
    /// Courier's namespace in the management cluster, where the worker kubeconfig Secrets live.
    #[arg(long, global = true, env = "COURIER_NAMESPACE", default_value = DEFAULT_NAMESPACE,
          value_name = "NAMESPACE")]
    pub courier_namespace: String,
    /// Deprecated spelling of --kubeconfig.
    #[arg(long, global = true, hide = true, value_name = "FILE")]
    pub management_kubeconfig: Option<PathBuf>,
    /// Deprecated spelling of --context.
    #[arg(long, global = true, hide = true, value_name = "NAME")]
    pub management_context: Option<String>,
}

/// A connected management cluster.
#[derive(Clone)]
pub struct Management {
    pub client: Client,
    /// `-n`, else the context's namespace (kubectl's rule).
    pub namespace: String,
    /// Courier's namespace (`--courier-namespace`).
    pub courier_namespace: String,
}

/// Prints the warning for an old spelling on stderr.
pub fn deprecated(old: &str, new: &str) {
    eprintln!("warning: {old} is deprecated and will be removed; use {new}");
}

/// A kubeconfig (file and context) chosen by flags; `None` file = the default loading rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeconfigSource {
    pub file: Option<PathBuf>,
    pub context: Option<String>,
}

impl ManagementArgs {
    /// The management kubeconfig these flags name, warning about old spellings.
    pub fn source(&self) -> KubeconfigSource {
        let file = match (&self.kubeconfig, &self.management_kubeconfig) {
            (Some(k), _) => Some(k.clone()),
            (None, Some(m)) => {
                deprecated("--management-kubeconfig", "--kubeconfig");
                Some(m.clone())
            }
            (None, None) => std::env::var_os(MANAGEMENT_KUBECONFIG_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        };
        let context = match (&self.context, &self.management_context) {
            (Some(c), _) => Some(c.clone()),
            (None, Some(m)) => {
                deprecated("--management-context", "--context");
                Some(m.clone())
            }
            (None, None) => None,
        };
        KubeconfigSource { file, context }
    }

    /// `cluster add` and `cluster kubeconfig` before `--cluster-kubeconfig` existed took the
    /// worker's kubeconfig as `--kubeconfig FILE [--context C]`. Without any `--cluster-*` flag, a
    /// `--kubeconfig` there is still read that way (with a warning), and the management cluster
    /// comes from `--management-kubeconfig`/`--management-context` or the defaults.
    /// Returns (management, worker).
    pub fn split_worker(
        &self,
        cluster_kubeconfig: Option<&PathBuf>,
        cluster_context: Option<&String>,
    ) -> (ManagementArgs, KubeconfigSource) {
        if cluster_kubeconfig.is_none() && cluster_context.is_none() && self.kubeconfig.is_some() {
            eprintln!(
                "warning: --kubeconfig/--context for the worker cluster are deprecated here and will \
                 mean the management cluster, as in every other command; use --cluster-kubeconfig \
                 FILE and --cluster-context NAME for the worker"
            );
            let worker = KubeconfigSource {
                file: self.kubeconfig.clone(),
                context: self.context.clone(),
            };
            let management = ManagementArgs {
                kubeconfig: None,
                context: None,
                ..self.clone()
            };
            return (management, worker);
        }
        let worker = KubeconfigSource {
            file: cluster_kubeconfig.cloned(),
            context: cluster_context.cloned(),
        };
        (self.clone(), worker)
    }

    /// Courier's namespace for `cluster` commands, where `-n` used to mean it (warned).
    pub fn courier_namespace_of_cluster_commands(&self) -> String {
        match &self.namespace {
            Some(ns) => {
                deprecated(
                    "-n/--namespace on `courier cluster` commands (for Courier's namespace)",
                    "--courier-namespace (or $COURIER_NAMESPACE)",
                );
                ns.clone()
            }
            None => self.courier_namespace.clone(),
        }
    }

    /// Connects to the management cluster.
    pub async fn connect(&self) -> anyhow::Result<Management> {
        let src = self.source();
        let config =
            util::management_config(src.file.as_deref(), src.context.as_deref(), false).await?;
        let namespace = match &self.namespace {
            Some(ns) => ns.clone(),
            None => config.default_namespace.clone(),
        };
        let client = courier_controller::credentials::client::client(config)
            .context("building the management cluster client")?;
        Ok(Management {
            client,
            namespace,
            courier_namespace: self.courier_namespace.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(kubeconfig: Option<&str>, context: Option<&str>) -> ManagementArgs {
        ManagementArgs {
            kubeconfig: kubeconfig.map(PathBuf::from),
            context: context.map(str::to_string),
            courier_namespace: DEFAULT_NAMESPACE.into(),
            ..Default::default()
        }
    }

    #[test]
    // Break the old-spelling branch of split_worker and this fails.
    fn old_worker_spelling_is_still_read_as_the_worker() {
        let old = ManagementArgs {
            management_kubeconfig: Some("m.kc".into()),
            ..args(Some("w.kc"), Some("w"))
        };
        let (m, w) = old.split_worker(None, None);
        assert_eq!(w.file, Some(PathBuf::from("w.kc")));
        assert_eq!(w.context.as_deref(), Some("w"));
        assert_eq!(m.source().file, Some(PathBuf::from("m.kc")));
        assert_eq!(m.source().context, None);

        let new = args(Some("m.kc"), Some("m"));
        let wk = PathBuf::from("w.kc");
        let (m, w) = new.split_worker(Some(&wk), None);
        assert_eq!(w.file, Some(wk));
        assert_eq!(w.context, None);
        assert_eq!(m.source().file, Some(PathBuf::from("m.kc")));
        assert_eq!(m.source().context.as_deref(), Some("m"));

        // --cluster-context alone: the worker is a context of the default kubeconfig, and
        // --kubeconfig stays the management cluster's.
        let wc = "eu-1".to_string();
        let (m, w) = new.split_worker(None, Some(&wc));
        assert_eq!(w.file, None);
        assert_eq!(w.context.as_deref(), Some("eu-1"));
        assert_eq!(m.kubeconfig, Some(PathBuf::from("m.kc")));
    }

    #[test]
    fn flags_win_over_old_spellings() {
        let a = ManagementArgs {
            management_kubeconfig: Some("old.kc".into()),
            management_context: Some("old".into()),
            ..args(Some("new.kc"), Some("new"))
        };
        let s = a.source();
        assert_eq!(s.file, Some(PathBuf::from("new.kc")));
        assert_eq!(s.context.as_deref(), Some("new"));
    }
}
