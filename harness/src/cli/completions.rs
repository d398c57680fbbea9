//! `referee completions SHELL` and `referee man`: the shell completion
//! script and the manual pages, both generated from the clap definition of
//! the command line (so they never fall behind it).

use super::{Cli, EXIT_OK, EXIT_USAGE, usage_error};
use clap::{Args, CommandFactory};
use clap_complete::Shell;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
#[command(after_help = "Install, e.g.:
  bash: referee completions bash > ~/.local/share/bash-completion/completions/referee
  zsh:  referee completions zsh > ~/.zfunc/_referee   (with fpath+=~/.zfunc before compinit)
  fish: referee completions fish > ~/.config/fish/completions/referee.fish")]
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Read it with `referee man | man -l -`; install the pages with \
`referee man --out ~/.local/share/man/man1`."
)]
pub struct ManArgs {
    /// Write one page per command (referee.1, referee-check.1, …) into DIR
    /// instead of the referee(1) page to standard output.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With --out: list the pages written as JSON.
    #[arg(long, requires = "out")]
    pub json: bool,
}

pub fn run_completions(a: CompletionsArgs) -> i32 {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "referee", &mut buf);
    write_stdout(&buf)
}

pub fn run_man(a: ManArgs) -> i32 {
    let Some(dir) = a.out else {
        let mut buf = Vec::new();
        if let Err(e) = clap_mangen::Man::new(Cli::command()).render(&mut buf) {
            return usage_error(format!("rendering the manual page: {e}"));
        }
        return write_stdout(&buf);
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return usage_error(format!("--out {}: {e}", dir.display()));
    }
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    if let Err(e) = write_pages(cmd, &dir, &mut pages) {
        return usage_error(e);
    }
    if a.json {
        let v = serde_json::json!({ "dir": dir, "pages": pages });
        println!("{v:#}");
    } else {
        for p in &pages {
            println!("{}", p.display());
        }
        eprintln!("{} manual pages written to {}", pages.len(), dir.display());
    }
    EXIT_OK
}

/// One page per command, sub-commands first, named `referee-check.1` etc.
/// (clap gives a built sub-command the display name `referee-check`).
fn write_pages(cmd: clap::Command, dir: &Path, pages: &mut Vec<PathBuf>) -> Result<(), String> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), dir, pages)?;
    }
    let man = clap_mangen::Man::new(cmd);
    let path = dir.join(man.get_filename());
    man.generate_to(dir)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    pages.push(path);
    Ok(())
}

/// Write generated text to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(buf: &[u8]) -> i32 {
    let mut out = std::io::stdout().lock();
    match out.write_all(buf).and_then(|()| out.flush()) {
        Ok(()) => EXIT_OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(e) => {
            super::error_line(format!("writing to standard output: {e}"));
            EXIT_USAGE
        }
    }
}
