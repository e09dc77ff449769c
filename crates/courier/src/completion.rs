//! `courier completion bash|zsh|fish`, and the name the CLI goes by: `courier`, or `kubectl
//! courier` when it runs as the kubectl plugin `kubectl-courier` (found on PATH by kubectl).

use std::ffi::OsStr;
use std::path::Path;

use anyhow::Context as _;
use clap::{Args, CommandFactory as _, ValueEnum};

use crate::Cli;

/// The plugin's file name: kubectl runs `kubectl-courier` for `kubectl courier`.
pub const PLUGIN_BINARY: &str = "kubectl-courier";

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Args, Debug)]
#[command(after_help = "Load it:\n  \
    bash:  source <(courier completion bash)        (or save it in /etc/bash_completion.d/courier)\n  \
    zsh:   courier completion zsh > \"${fpath[1]}/_courier\"\n  \
    fish:  courier completion fish > ~/.config/fish/completions/courier.fish")]
pub struct CompletionArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Whether the program was started as the kubectl plugin (`kubectl-courier`, or a link of that name).
pub fn is_plugin(argv0: Option<&OsStr>) -> bool {
    argv0
        .and_then(|a| Path::new(a).file_stem())
        .and_then(OsStr::to_str)
        .is_some_and(|n| n == PLUGIN_BINARY)
}

/// The command line parser, named as the user invoked it (`kubectl courier` as a plugin), so that
/// usage lines and help show what to type.
pub fn command_for(argv0: Option<&OsStr>) -> clap::Command {
    let cmd = Cli::command();
    if is_plugin(argv0) {
        cmd.name("kubectl courier").bin_name("kubectl courier")
    } else {
        cmd
    }
}

/// The completion script for `shell`.
pub fn script(shell: Shell) -> anyhow::Result<String> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    let gen_shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(gen_shell, &mut cmd, "courier", &mut buf);
    String::from_utf8(buf).context("the completion script is not UTF-8")
}

pub fn print(a: CompletionArgs) -> anyhow::Result<()> {
    use std::io::Write as _;
    let text = script(a.shell)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing the completion script")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_with_the_subcommands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let s = script(shell).expect("script");
            for word in [
                "cluster",
                "submit",
                "jobs",
                "describe",
                "logs",
                "completion",
                "kubeconfig",
            ] {
                assert!(s.contains(word), "{shell:?} script lacks {word}");
            }
            assert!(
                s.contains("cluster-kubeconfig"),
                "{shell:?}: flags of subcommands"
            );
        }
        assert!(script(Shell::Bash).expect("bash").contains("complete -F"));
        assert!(
            script(Shell::Zsh)
                .expect("zsh")
                .starts_with("#compdef courier")
        );
        assert!(
            script(Shell::Fish)
                .expect("fish")
                .contains("complete -c courier")
        );
    }

    #[test]
    fn plugin_name_from_argv0() {
        assert!(is_plugin(Some(OsStr::new(
            "/usr/local/bin/kubectl-courier"
        ))));
        assert!(is_plugin(Some(OsStr::new("kubectl-courier.exe"))));
        assert!(!is_plugin(Some(OsStr::new("/usr/bin/courier"))));
        assert!(!is_plugin(None));
        // Break command_for (ignore argv0) and this fails.
        let help = command_for(Some(OsStr::new("kubectl-courier")))
            .render_usage()
            .to_string();
        assert!(help.contains("kubectl courier"), "{help}");
        let mut cmd = command_for(Some(OsStr::new("kubectl-courier")));
        let sub = cmd
            .try_get_matches_from_mut(["kubectl-courier", "jobs", "--help"])
            .expect_err("help is an early exit")
            .to_string();
        assert!(sub.contains("Usage: kubectl courier jobs"), "{sub}");
    }
}
