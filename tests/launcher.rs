//! Integration tests of the `ferrorun` launcher, with `sh -c` scripts as ranks.
//!
//! Ranks record their pids (and their own children's pids) in a per-test scratch directory,
//! passed to them as `$D`, so a test can check that no process is left behind. A `Launch`
//! guard kills ferrorun and every recorded process when the test ends, even on failure.
//! Time limits are generous: the machine running these may be small and busy.

use std::collections::HashSet;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const FERRORUN: &str = env!("CARGO_BIN_EXE_ferrorun");

/// Bound for a job that should end on its own or be torn down; its ranks would sleep 60 s.
const FINISH: Duration = Duration::from_secs(30);
/// Bound for processes to disappear once ferrorun has exited ("within 2 s" in the spec).
const GONE: Duration = Duration::from_secs(5);
/// Bound for ranks to start and record their pids.
const STARTUP: Duration = Duration::from_secs(30);

/// Records the rank's pid in `$D/r<rank>.pid` (written, then renamed, so never half-read).
const RECORD: &str =
    r#"echo $$ > "$D/r$FERROCOLL_RANK.t"; mv "$D/r$FERROCOLL_RANK.t" "$D/r$FERROCOLL_RANK.pid";"#;
/// Starts a child of the rank that sleeps, recorded in `$D/c<rank>.pid`.
const CHILD: &str = concat!(
    r#"sleep 60 & echo $! > "$D/c$FERROCOLL_RANK.t"; "#,
    r#"mv "$D/c$FERROCOLL_RANK.t" "$D/c$FERROCOLL_RANK.pid";"#
);

/// A running ferrorun with its output collected in the background.
struct Launch {
    child: Child,
    dir: ScratchDir,
    started: Instant,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// An empty scratch directory unique to this test process and test name, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(name: &str) -> ScratchDir {
        let dir = std::env::temp_dir().join(format!("ferrorun-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        ScratchDir(dir)
    }

    fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `ferrorun <options> sh -c <script>` as an argument list.
fn sh(options: &[&str], script: &str) -> Vec<String> {
    let mut args: Vec<String> = options.iter().map(|s| s.to_string()).collect();
    args.extend(["sh".to_string(), "-c".to_string(), script.to_string()]);
    args
}

impl Launch {
    fn start(name: &str, args: &[String]) -> Launch {
        Launch::start_with(name, Path::new(FERRORUN), args, None, |_| {})
    }

    /// Starts `program` (ferrorun or a link to it) with `stdin` as its input (or /dev/null);
    /// `customize` may add to the command last.
    fn start_with(
        name: &str,
        program: &Path,
        args: &[String],
        stdin: Option<&[u8]>,
        customize: impl FnOnce(&mut Command),
    ) -> Launch {
        let dir = ScratchDir::new(name);
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env("D", &dir.0)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: signal() is async-signal-safe. The test runner may have been started in the
        // background with SIGINT ignored, which ferrorun would rightly keep ignoring; the
        // tests want the ordinary dispositions.
        unsafe {
            cmd.pre_exec(|| {
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        customize(&mut cmd);
        let mut child = cmd.spawn().expect("cannot start ferrorun");
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input).unwrap();
        }
        let stdout = child.stdout.take().map(collect);
        let stderr = child.stderr.take().map(collect);
        Launch {
            child,
            dir,
            started: Instant::now(),
            stdout,
            stderr,
        }
    }

    fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill has no memory effects.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    /// Waits for ferrorun to exit; panics (and the guard cleans up) after `limit`. Also
    /// checks that ferrorun's stdout and stderr close soon after: ranks and their children
    /// inherit them, so an open pipe means a process of the job survived.
    fn wait(&mut self, limit: Duration) -> Finished {
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                self.started.elapsed() < limit,
                "ferrorun did not finish within {limit:?}"
            );
            thread::sleep(Duration::from_millis(20));
        };
        let elapsed = self.started.elapsed();
        let outputs = [&self.stdout, &self.stderr];
        let closed = || {
            outputs
                .iter()
                .all(|h| h.as_ref().is_some_and(|h| h.is_finished()))
        };
        let exited = Instant::now();
        while !closed() {
            assert!(
                exited.elapsed() < GONE,
                "ferrorun's output still open {GONE:?} after it exited: a process survived"
            );
            thread::sleep(Duration::from_millis(20));
        }
        Finished {
            code: status.code(),
            stdout: self.stdout.take().unwrap().join().unwrap(),
            stderr: self.stderr.take().unwrap().join().unwrap(),
            elapsed,
        }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits until the files `<name>.pid` exist and returns the pids in them.
    fn pids(&self, names: &[String]) -> Vec<libc::pid_t> {
        names
            .iter()
            .map(|name| {
                let path = self.dir.join(format!("{name}.pid"));
                let text = wait_for_file(&path, STARTUP);
                text.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("bad pid file {path:?}: {text:?}"))
            })
            .collect()
    }

    /// Whatever pids the ranks recorded so far (job ids in `job.pid` do not parse).
    fn recorded_pids(&self) -> Vec<libc::pid_t> {
        let entries = fs::read_dir(&self.dir.0).into_iter().flatten().flatten();
        entries
            .filter(|e| e.file_name().to_string_lossy().ends_with(".pid"))
            .filter_map(|e| fs::read_to_string(e.path()).ok()?.trim().parse().ok())
            .collect()
    }

    /// Pid file names `r<rank>` (and `c<rank>` with `children`) for `ranks`.
    fn rank_pids(&self, ranks: &[usize], children: bool) -> Vec<libc::pid_t> {
        let mut names: Vec<String> = ranks.iter().map(|r| format!("r{r}")).collect();
        if children {
            names.extend(ranks.iter().map(|r| format!("c{r}")));
        }
        self.pids(&names)
    }
}

impl Drop for Launch {
    /// Kills ferrorun and every process a rank recorded; `dir` is removed afterwards.
    fn drop(&mut self) {
        if self.running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for pid in self.recorded_pids() {
            if alive(pid) {
                // SAFETY: kill has no memory effects.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

fn collect(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn wait_for_file(path: &Path, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = fs::read_to_string(path) {
            return text;
        }
        assert!(
            start.elapsed() < limit,
            "{path:?} did not appear within {limit:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// True if `pid` exists and is not a zombie (an orphaned zombie may wait for a slow init).
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to `limit` for every pid to be gone; returns the ones still alive.
fn wait_gone(pids: &[libc::pid_t], limit: Duration) -> Vec<libc::pid_t> {
    let start = Instant::now();
    loop {
        let left: Vec<_> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || start.elapsed() >= limit {
            return left;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn assert_all_gone(pids: &[libc::pid_t]) {
    let left = wait_gone(pids, GONE);
    assert!(
        left.is_empty(),
        "processes {left:?} of {pids:?} still alive"
    );
}

/// Lines of `text` that start with `prefix`, in order.
fn lines_with<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn ranks_get_the_protocol_environment() {
    let mut jobs = HashSet::new();
    for n in 1..=4 {
        // One field per variable; the line breaks inside the quotes are whitespace too.
        let script = r#"echo "$FERROCOLL_RANK $FERROCOLL_SIZE
            $FERROCOLL_LOCAL_RANK $FERROCOLL_LOCAL_SIZE $FERROCOLL_JOB
            $FERROCOLL_LAUNCHER_PID $FERRORUN_TEST_MARK" > "$D/env.$FERROCOLL_RANK""#;
        let args = sh(&["-n", &n.to_string()], script);
        let mut launch = Launch::start_with(
            &format!("env{n}"),
            Path::new(FERRORUN),
            &args,
            None,
            |cmd| {
                cmd.env("FERRORUN_TEST_MARK", "inherited");
            },
        );
        let done = launch.wait(FINISH);
        assert_eq!(done.code, Some(0), "stderr: {}", done.stderr);
        let mut job_of_run = None;
        for rank in 0..n {
            let text = fs::read_to_string(launch.dir.join(format!("env.{rank}"))).unwrap();
            let fields: Vec<&str> = text.split_whitespace().collect();
            let expected_pid = launch.pid().to_string();
            assert_eq!(fields.len(), 7, "{text:?}");
            assert_eq!(fields[0], rank.to_string());
            assert_eq!(fields[1], n.to_string());
            assert_eq!(fields[2], rank.to_string());
            assert_eq!(fields[3], n.to_string());
            assert!(fields[4].len() >= 16 && fields[4].chars().all(|c| c.is_ascii_hexdigit()));
            assert_eq!(fields[5], expected_pid);
            assert_eq!(fields[6], "inherited");
            assert_eq!(*job_of_run.get_or_insert(fields[4].to_string()), fields[4]);
        }
        jobs.insert(job_of_run.unwrap());
    }
    assert_eq!(jobs.len(), 4, "job ids repeat across runs: {jobs:?}");
}

#[test]
fn tag_output_prefixes_each_line_with_the_rank() {
    let script = r#"printf 'one\ntwo\n'; printf 'oops\n' >&2; printf tail"#;
    let mut launch = Launch::start("tag", &sh(&["--tag-output", "-n", "2"], script));
    let done = launch.wait(FINISH);
    assert_eq!(done.code, Some(0), "stderr: {}", done.stderr);
    for rank in 0..2 {
        let prefix = format!("[{rank}] ");
        let expected: Vec<String> = ["one", "two", "tail"]
            .iter()
            .map(|l| format!("{prefix}{l}"))
            .collect();
        assert_eq!(
            lines_with(&done.stdout, &prefix),
            expected,
            "stdout: {:?}",
            done.stdout
        );
        assert_eq!(lines_with(&done.stderr, &prefix), [format!("{prefix}oops")]);
    }
    assert_eq!(done.stdout.lines().count(), 6, "stdout: {:?}", done.stdout);
    assert_eq!(done.stderr.lines().count(), 2, "stderr: {:?}", done.stderr);
}

#[test]
fn output_passes_through_unchanged_without_tags() {
    let mut launch = Launch::start(
        "plain",
        &sh(&["-n", "2"], r#"printf 'x\n'; printf 'y' >&2"#),
    );
    let done = launch.wait(FINISH);
    assert_eq!(done.code, Some(0));
    assert_eq!(done.stdout, "x\nx\n");
    assert_eq!(done.stderr, "yy");
}

#[test]
fn stdin_goes_to_rank_zero_only() {
    let args = sh(&["-n", "2"], r#"cat > "$D/in.$FERROCOLL_RANK""#);
    let mut launch = Launch::start_with(
        "stdin",
        Path::new(FERRORUN),
        &args,
        Some(b"hello\n"),
        |_| {},
    );
    let done = launch.wait(FINISH);
    assert_eq!(done.code, Some(0), "stderr: {}", done.stderr);
    assert_eq!(
        fs::read_to_string(launch.dir.join("in.0")).unwrap(),
        "hello\n"
    );
    assert_eq!(fs::read_to_string(launch.dir.join("in.1")).unwrap(), "");
}

#[test]
fn success_when_every_rank_exits_zero_at_different_times() {
    let script = r#"[ "$FERROCOLL_RANK" = 0 ] || sleep 1; exit 0"#;
    let mut launch = Launch::start("success", &sh(&["-n", "4"], script));
    let done = launch.wait(FINISH);
    assert_eq!(done.code, Some(0));
    assert_eq!(done.stderr, "", "ferrorun should be silent on success");
}

#[test]
fn first_failing_rank_decides_the_exit_code() {
    // Rank 1 fails once ranks 0 and 2 are set up. Those then exit 9 when terminated, which
    // must not count: they were stopped by ferrorun.
    let script = format!(
        r#"if [ "$FERROCOLL_RANK" = 1 ]; then
             while [ ! -e "$D/r0.pid" ] || [ ! -e "$D/r2.pid" ]; do sleep 0.05; done
             exit 3
           fi
           trap 'exit 9' TERM; {CHILD} {RECORD} wait"#
    );
    let mut launch = Launch::start("first", &sh(&["-n", "3"], &script));
    let pids = launch.rank_pids(&[0, 2], true);
    let done = launch.wait(FINISH);
    assert_eq!(done.code, Some(3), "stderr: {}", done.stderr);
    let reports = lines_with(&done.stderr, "ferrorun:");
    assert_eq!(reports.len(), 1, "stderr: {}", done.stderr);
    assert!(
        reports[0].starts_with("ferrorun: rank 1 (pid "),
        "{}",
        reports[0]
    );
    assert!(
        reports[0].ends_with(") exited with code 3; terminating the other ranks"),
        "{}",
        reports[0]
    );
    assert_all_gone(&pids);
}

#[test]
fn rank_killed_by_signal_exits_128_plus_signal_and_stops_the_rest() {
    // Rank 0 has a child; rank 1 ignores SIGTERM, so only the SIGKILL 1 s later stops it.
    let script = format!(
        r#"case "$FERROCOLL_RANK" in
             0) {CHILD} {RECORD} wait ;;
             1) trap '' TERM; {RECORD} exec sleep 60 ;;
             2) while [ ! -e "$D/r0.pid" ] || [ ! -e "$D/r1.pid" ]; do sleep 0.05; done
                kill -KILL $$ ;;
           esac"#
    );
    let mut launch = Launch::start("signal", &sh(&["-n", "3"], &script));
    let pids = launch.rank_pids(&[0, 1], false);
    let child = launch.pids(&["c0".to_string()]);
    let done = launch.wait(FINISH);
    assert_eq!(
        done.code,
        Some(128 + libc::SIGKILL),
        "stderr: {}",
        done.stderr
    );
    let reports = lines_with(&done.stderr, "ferrorun:");
    assert_eq!(reports.len(), 1, "stderr: {}", done.stderr);
    assert!(
        reports[0].starts_with("ferrorun: rank 2 (pid "),
        "{}",
        reports[0]
    );
    assert!(
        reports[0].ends_with(") killed by signal 9 (SIGKILL); terminating the other ranks"),
        "{}",
        reports[0]
    );
    assert_all_gone(&pids);
    assert_all_gone(&child);
}

#[test]
fn signals_to_ferrorun_reach_every_rank_and_its_children() {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let script = format!("{CHILD} {RECORD} wait");
        let mut launch = Launch::start(&format!("forward{sig}"), &sh(&["-n", "3"], &script));
        let pids = launch.rank_pids(&[0, 1, 2], true);
        launch.signal(sig);
        let done = launch.wait(FINISH);
        assert_eq!(
            done.code,
            Some(128 + sig),
            "signal {sig}; stderr: {}",
            done.stderr
        );
        // Ranks dying of the signal the user sent is not reported as a failure.
        assert_eq!(done.stderr, "", "signal {sig}");
        assert_all_gone(&pids);
    }
}

/// ferrorun blocks the signals it waits for; its ranks must not inherit
/// that mask, or a forwarded SIGTERM would stay pending in a rank that never
/// unblocks it (seen: `timeout` stopping a hung MPI job left it running).
#[test]
fn ranks_start_with_no_signal_blocked() {
    let args: Vec<String> = ["-n", "2", "grep", "^SigBlk", "/proc/self/status"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut launch = Launch::start("sigmask", &args);
    let done = launch.wait(FINISH);
    assert_eq!(done.code, Some(0), "stderr: {}", done.stderr);
    assert_eq!(
        done.stdout,
        "SigBlk:\t0000000000000000\n".repeat(2),
        "a rank started with signals blocked"
    );
}

#[test]
fn a_second_signal_kills_ranks_that_ignore_the_first() {
    // Each rank notes the forwarded SIGTERM and carries on.
    let script = format!(
        r#"trap 'touch "$D/got.$FERROCOLL_RANK"' TERM; {RECORD}
           while :; do sleep 1; done"#
    );
    let mut launch = Launch::start("second", &sh(&["-n", "2"], &script));
    let pids = launch.rank_pids(&[0, 1], false);
    launch.signal(libc::SIGTERM);
    wait_for_file(&launch.dir.join("got.0"), STARTUP);
    wait_for_file(&launch.dir.join("got.1"), STARTUP);
    assert!(
        launch.running(),
        "ferrorun ended although the ranks ignored SIGTERM"
    );
    launch.signal(libc::SIGTERM);
    let done = launch.wait(FINISH);
    assert_eq!(
        done.code,
        Some(128 + libc::SIGTERM),
        "stderr: {}",
        done.stderr
    );
    assert!(
        done.stderr
            .contains("ferrorun: received SIGTERM; killing ranks now"),
        "stderr: {}",
        done.stderr
    );
    assert!(!done.stderr.contains("rank "), "stderr: {}", done.stderr);
    assert_all_gone(&pids);
}

#[test]
fn ignored_sighup_stays_ignored() {
    // Under `nohup`, SIGHUP must neither be forwarded nor count as the user's signal: if
    // ferrorun caught the two SIGHUPs below, the second would kill the job.
    let args = sh(&["-n", "1"], &format!("{RECORD} sleep 3"));
    let mut launch = Launch::start_with("nohup", Path::new(FERRORUN), &args, None, |cmd| {
        // SAFETY: signal() is async-signal-safe; this is what `nohup` does.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    launch.rank_pids(&[0], false);
    launch.signal(libc::SIGHUP);
    thread::sleep(Duration::from_millis(300));
    launch.signal(libc::SIGHUP);
    let done = launch.wait(FINISH);
    assert_eq!(done.code, Some(0), "stderr: {}", done.stderr);
    assert_eq!(done.stderr, "");
}

#[test]
fn sigkill_to_ferrorun_still_kills_the_ranks() {
    let script = format!("{RECORD} exec sleep 60");
    let mut launch = Launch::start("sigkill", &sh(&["-n", "2"], &script));
    let pids = launch.rank_pids(&[0, 1], false);
    launch.signal(libc::SIGKILL);
    let done = launch.wait(FINISH);
    assert_eq!(done.code, None, "ferrorun should have died of SIGKILL");
    assert_all_gone(&pids);
}

#[test]
fn unknown_program_exits_127() {
    let args = ["-n", "2", "ferrorun-test-no-such-program"].map(String::from);
    let mut launch = Launch::start("noprog", &args);
    let done = launch.wait(FINISH);
    assert_eq!(done.code, Some(127));
    assert_eq!(
        done.stderr,
        "ferrorun: cannot start 'ferrorun-test-no-such-program': No such file or directory\n"
    );
}

#[test]
fn bad_usage_exits_2_with_usage_text() {
    let cases: &[&[&str]] = &[
        &[],
        &["-n", "0", "true"],
        &["-n", "x", "true"],
        &["-n", "-1", "true"],
        &["-n"],
        &["-n", "2"],
        &["true"],
        &["--bogus", "-n", "1", "true"],
        &["-n", "1", "--timeout", "soon", "true"],
        &["-n", "1", "--timeout", "0", "true"],
        &["--bind-to", "socket", "-n", "1", "true"],
        &["-n", "1", "--bind-to", "core:bogus", "true"],
        &["-n", "1", "-x", "1X=2", "true"],
        &["-n", "1", "-x"],
        &["-n", "1", "-genv", "A"],
        &["-n", "1", "-genv", "A-B", "1", "true"],
    ];
    for (i, args) in cases.iter().enumerate() {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut launch = Launch::start(&format!("usage{i}"), &args);
        let done = launch.wait(FINISH);
        assert_eq!(done.code, Some(2), "args {args:?}");
        assert!(
            done.stderr.starts_with("ferrorun: "),
            "args {args:?}: {}",
            done.stderr
        );
        assert!(
            done.stderr.contains("\nUsage: ferrorun -n N"),
            "args {args:?}"
        );
        assert_eq!(done.stdout, "", "args {args:?}");
    }
    for (flag, expected) in [
        ("--help", "Usage: ferrorun -n N"),
        ("--version", "ferrorun (ferrocoll) "),
    ] {
        let mut launch = Launch::start(&format!("info{flag}"), &[flag.to_string()]);
        let done = launch.wait(FINISH);
        assert_eq!(done.code, Some(0), "{flag}");
        assert!(done.stdout.starts_with(expected), "{flag}: {}", done.stdout);
    }
}

#[test]
fn mpiexec_names_and_option_forms() {
    let links = ScratchDir::new("links");
    for name in ["mpiexec", "mpirun"] {
        std::os::unix::fs::symlink(FERRORUN, links.join(name)).unwrap();
    }
    let size = r#"echo "$FERROCOLL_SIZE""#;
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        ("mpiexec", sh(&["-np", "2"], size), "2\n2\n"),
        ("mpirun", sh(&["--np", "3", "--"], size), "3\n3\n3\n"),
        // Options after the program belong to the program.
        (
            "mpiexec",
            sh(&["-n", "1"], r#"printf '%s\n' "$*""#)
                .into_iter()
                .chain(["sh", "-n", "5", "--tag-output"].map(String::from))
                .collect(),
            "-n 5 --tag-output\n",
        ),
    ];
    for (i, (name, args, expected)) in cases.into_iter().enumerate() {
        let mut launch =
            Launch::start_with(&format!("alias{i}"), &links.join(name), &args, None, |_| {});
        let done = launch.wait(FINISH);
        assert_eq!(done.code, Some(0), "{name} {args:?}: {}", done.stderr);
        assert_eq!(done.stdout, expected, "{name} {args:?}");
    }
    let mut launch = Launch::start_with(
        "alias-help",
        &links.join("mpirun"),
        &["--help".to_string()],
        None,
        |_| {},
    );
    assert!(launch.wait(FINISH).stdout.starts_with("Usage: mpirun -n N"));
}

/// The options Open MPI's and MPICH's command lines carry: `-x` and
/// `-genv` give every rank a variable, `--bind-to` sets FERROCOLL_BIND (the
/// last one given, over the launcher's own), and `--oversubscribe` and
/// `--allow-run-as-root` are accepted. On this host, and through `--hosts`
/// with a remote shell that starts the rank here with an empty environment
/// (as a fresh login would), the store on loopback.
#[test]
fn open_mpi_and_mpich_options_reach_every_rank() {
    let rsh = ScratchDir::new("rsh");
    let script = rsh.join("rsh.sh");
    fs::write(&script, "shift\nexec env -i PATH=\"$PATH\" sh -c \"$1\"\n").unwrap();
    let options = [
        "--oversubscribe",
        "-allow-run-as-root",
        "--bind-to",
        "core:overload-allowed",
        "-x",
        "FOO=a=b",
        "-x",
        "BAZ",
        "-x",
        "UNSET_HERE",
        "-genv",
        "QUX",
        "x y",
        "-bind-to",
        "block",
    ];
    let show = r#"echo "$FERROCOLL_SIZE|$FERROCOLL_BIND|$FOO|$BAZ|$QUX|${UNSET_HERE-unset}""#;
    let remote = ["--hosts", "localhost:2", "--rsh"];
    let rsh_cmd = format!("sh {}", script.display());
    for (i, hosts) in [
        vec![],
        remote
            .iter()
            .map(|s| s.to_string())
            .chain([rsh_cmd])
            .collect(),
    ]
    .into_iter()
    .enumerate()
    {
        let mut args: Vec<String> = hosts;
        args.extend(["-n", "2"].map(String::from));
        args.extend(sh(&options, show));
        let mut launch = Launch::start_with(
            &format!("mpiopts{i}"),
            Path::new(FERRORUN),
            &args,
            None,
            |c| {
                c.env("BAZ", "from here")
                    .env("FERROCOLL_BIND", "none")
                    .env("FERROCOLL_SOCKET_IFNAME", "lo")
                    .env_remove("UNSET_HERE");
            },
        );
        let done = launch.wait(FINISH);
        assert_eq!(done.code, Some(0), "{args:?}: {}", done.stderr);
        assert_eq!(
            done.stdout,
            "2|block|a=b|from here|x y|unset\n".repeat(2),
            "{args:?}"
        );
    }
}

#[test]
fn timeout_kills_the_job_with_124() {
    let script = format!("{CHILD} {RECORD} wait");
    let mut launch = Launch::start("timeout", &sh(&["-n", "2", "--timeout", "2"], &script));
    let done = launch.wait(FINISH);
    assert_eq!(done.code, Some(124), "stderr: {}", done.stderr);
    assert_eq!(
        done.stderr,
        "ferrorun: job exceeded timeout of 2 s; killing ranks\n"
    );
    // A loaded machine may not have let every rank record itself within the limit; `wait`
    // already checked that no process holds ferrorun's output.
    assert_all_gone(&launch.recorded_pids());

    let mut quick = Launch::start(
        "timeout-quick",
        &sh(&["--timeout", "30", "-n", "2"], "exit 0"),
    );
    let done = quick.wait(FINISH);
    assert_eq!(done.code, Some(0), "stderr: {}", done.stderr);
    assert!(done.elapsed < Duration::from_secs(25));
}

/// Removes the named files under /dev/shm when dropped.
struct ShmFiles(Vec<PathBuf>);

impl Drop for ShmFiles {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = fs::remove_file(path);
        }
    }
}

#[test]
fn shared_memory_files_of_the_job_are_removed_on_every_exit() {
    // Rank 0 leaves segments behind as if it crashed before unlinking them.
    let create = r#"if [ "$FERROCOLL_RANK" = 0 ]; then
                      : > "/dev/shm/ferrocoll-$FERROCOLL_JOB"
                      : > "/dev/shm/ferrocoll-$FERROCOLL_JOB-ring"
                      echo "$FERROCOLL_JOB" > "$D/job.t"; mv "$D/job.t" "$D/job.pid"
                    fi
                    while [ ! -e "$D/job.pid" ]; do sleep 0.05; done;"#;
    let unrelated = PathBuf::from(format!(
        "/dev/shm/ferrocoll-unrelated-{}",
        std::process::id()
    ));
    fs::write(&unrelated, b"").expect("/dev/shm must be writable");
    let _unrelated_guard = ShmFiles(vec![unrelated.clone()]);
    let endings = [
        ("ok", "exit 0", None, 0),
        ("fail", "exit 1", None, 1),
        (
            "term",
            "exec sleep 60",
            Some(libc::SIGTERM),
            128 + libc::SIGTERM,
        ),
    ];
    for (name, end, signal, code) in endings {
        let script = format!("{create} {end}");
        let mut launch = Launch::start(&format!("shm-{name}"), &sh(&["-n", "2"], &script));
        let job = wait_for_file(&launch.dir.join("job.pid"), STARTUP)
            .trim()
            .to_string();
        let segments = ShmFiles(vec![
            PathBuf::from(format!("/dev/shm/ferrocoll-{job}")),
            PathBuf::from(format!("/dev/shm/ferrocoll-{job}-ring")),
        ]);
        if let Some(sig) = signal {
            launch.signal(sig);
        }
        let done = launch.wait(FINISH);
        assert_eq!(done.code, Some(code), "{name}: {}", done.stderr);
        for path in &segments.0 {
            assert!(!path.exists(), "{name}: {path:?} left behind");
        }
    }
    assert!(unrelated.exists(), "another job's segment was removed");
}
