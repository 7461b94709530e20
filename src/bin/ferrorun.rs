//! `ferrorun`: start N ranks of a program on this host (ferrocoll's `mpiexec`).
//!
//! The same binary is also installed as `mpiexec` and `mpirun`; it behaves identically under
//! every name. Each rank is a child process in its own process group, so that signalling the
//! group also reaches whatever the rank started itself. The main thread supervises the job:
//! it reaps ranks, forwards SIGINT/SIGTERM/SIGHUP, and tears the job down on the first failure
//! or on `--timeout`. The environment each rank gets is in README.md (`ferrorun`).

use std::ffi::OsString;
use std::path::Path;
use std::process;

/// Prefix of every message ferrorun prints itself.
const NAME: &str = "ferrorun";

/// Exit codes of the launcher itself (ranks' codes are passed through).
const EXIT_USAGE: i32 = 2;
const EXIT_TIMEOUT: i32 = 124;
const EXIT_CANNOT_START: i32 = 127;

fn main() {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let invoked = invoked_name(argv.first());
    let opts = match cli::parse(argv.get(1..).unwrap_or(&[])) {
        Ok(cli::Action::Run(opts)) => opts,
        Ok(cli::Action::Help) => {
            print!("{}", cli::usage(&invoked));
            process::exit(0);
        }
        Ok(cli::Action::Version) => {
            println!("{invoked} (ferrocoll) {}", env!("CARGO_PKG_VERSION"));
            process::exit(0);
        }
        Err(msg) => {
            eprintln!("{NAME}: {msg}");
            eprint!("{}", cli::usage(&invoked));
            process::exit(EXIT_USAGE);
        }
    };
    // `process::exit` skips destructors, so everything that must be cleaned up lives in `run`.
    process::exit(run(&opts));
}

/// The name the user typed (`ferrorun`, `mpiexec`, `mpirun`), for the usage text.
fn invoked_name(argv0: Option<&OsString>) -> String {
    argv0
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| NAME.to_string())
}

/// Runs the job and returns ferrorun's exit code.
fn run(opts: &cli::Options) -> i32 {
    // Block before any thread exists: every thread inherits the mask, so the signals stay
    // pending until the main loop collects them with sigtimedwait.
    let signals = signals::WaitSet::block();
    let job_id = job::new_job_id();
    // Dropped on every way out of this function, unwinding included.
    let _shm = shm::Cleanup { job_id: &job_id };
    let mut output = output::Forwarders::new();
    let mut job = match job::Job::start(opts, &job_id, &mut output) {
        Ok(job) => job,
        Err(err) => {
            let program = opts.program.to_string_lossy();
            eprintln!("{NAME}: cannot start '{program}': {}", describe(&err));
            // Dropping the partly started job kills the ranks that did start.
            return EXIT_CANNOT_START;
        }
    };
    let code = job.supervise(&signals, opts.timeout.as_ref());
    output.finish();
    code
}

/// An OS error as `strerror` words, without std's " (os error N)" suffix.
fn describe(err: &std::io::Error) -> String {
    let text = err.to_string();
    match err.raw_os_error() {
        Some(code) => text
            .strip_suffix(&format!(" (os error {code})"))
            .unwrap_or(&text)
            .to_string(),
        None => text,
    }
}

/// Command-line parsing. Options end at the first non-option word (the program) or at `--`,
/// so the program's own options are never interpreted.
mod cli {
    use std::ffi::OsString;
    use std::time::Duration;

    pub struct Options {
        pub nranks: usize,
        /// `--hosts a:2,b:2`: (host, slots) in rank order; empty for this host only.
        pub hosts: Vec<(String, usize)>,
        /// `--rsh`: the remote-shell command template (`{host}` is replaced).
        pub rsh: String,
        pub tag_output: bool,
        pub timeout: Option<Timeout>,
        /// Variables every rank gets (`-x`, `-genv`, `--bind-to`), in the
        /// order given: a later one wins; the protocol's own come after.
        pub env: Vec<(String, String)>,
        pub program: OsString,
        pub args: Vec<OsString>,
    }

    /// The limit, plus the text the user wrote so the message quotes it unchanged.
    pub struct Timeout {
        pub limit: Duration,
        pub text: String,
    }

    pub enum Action {
        Run(Options),
        Help,
        Version,
    }

    pub fn usage(invoked: &str) -> String {
        format!(
            "\
Usage: {invoked} -n N [--hosts H:N,...] [--rsh CMD] [--tag-output] [--timeout SECS]
       [--bind-to POLICY] [-x NAME[=VALUE]] [-genv NAME VALUE] [--] PROGRAM [ARGS...]
Start N processes (ranks) of PROGRAM on this host (or on the hosts given), for ferrocoll.

Options:
  -n N, -np N, --np N  number of ranks to start (at least 1; with --hosts, at
                       most the slots given; default all of them)
  --hosts H:N,...      start ranks on these hosts, N on each, in rank order,
                       through the remote shell; ranks of one host share memory
                       and hosts talk TCP
  --rsh CMD            remote shell for --hosts (default \"ssh\"); {{host}} in CMD is
                       replaced by the host, else the host follows CMD; the rank's
                       command line comes last, as one word
  --tag-output         prefix every output line with \"[RANK] \"
  --timeout SECS       kill the job if it runs longer than SECS seconds
  --bind-to POLICY     where ranks run (sets FERROCOLL_BIND): auto (the default:
                       one CPU each, round robin, when a host runs two or more
                       ranks), core (also hwthread; also a lone rank), block
                       (consecutive ranks share a CPU where they outnumber the
                       CPUs) or none; a ':overload-allowed' or ':if-supported'
                       suffix is accepted
  -x NAME[=VALUE]      give every rank NAME (with VALUE, or as set here; ranks
                       on this host inherit ferrorun's environment anyway)
  -genv NAME VALUE     give every rank NAME=VALUE
  --oversubscribe, --allow-run-as-root
                       accepted for Open MPI's command lines; ferrorun never
                       refuses either
  -h, --help           print this help
  -V, --version        print the version

Each rank gets FERROCOLL_RANK, FERROCOLL_SIZE, FERROCOLL_LOCAL_RANK,
FERROCOLL_LOCAL_SIZE, FERROCOLL_JOB and FERROCOLL_LAUNCHER_PID.
Standard input goes to rank 0; the other ranks read /dev/null.
SIGINT, SIGTERM and SIGHUP are forwarded to all ranks. When a rank fails,
the other ranks get SIGTERM, then SIGKILL one second later.

Exit status: 0 if every rank exits 0; otherwise the status of the first rank
that failed (128+S if killed by signal S); 124 on timeout; 127 if PROGRAM
cannot be started; 2 on a usage error.
"
        )
    }

    pub fn parse(args: &[OsString]) -> Result<Action, String> {
        let mut nranks = None;
        let mut tag_output = false;
        let mut timeout = None;
        let mut hosts = Vec::new();
        let mut rsh = "ssh".to_string();
        let mut env = Vec::new();
        let mut i = 0;
        while i < args.len() {
            // A word that is not UTF-8 cannot be one of our options, so it is the program.
            let Some(arg) = args[i].to_str() else { break };
            match arg {
                "-n" | "-np" | "--np" => {
                    nranks = Some(parse_nranks(value_of(args, i)?)?);
                    i += 2;
                }
                "--timeout" => {
                    timeout = Some(parse_timeout(value_of(args, i)?)?);
                    i += 2;
                }
                "--hosts" => {
                    hosts = parse_hosts(value_of(args, i)?)?;
                    i += 2;
                }
                "--rsh" => {
                    rsh = value_of(args, i)?.to_string();
                    if rsh.split_whitespace().next().is_none() {
                        return Err("--rsh needs a command".into());
                    }
                    i += 2;
                }
                "--tag-output" => {
                    tag_output = true;
                    i += 1;
                }
                "--bind-to" | "-bind-to" => {
                    let policy = parse_bind(value_of(args, i)?)?;
                    env.push(("FERROCOLL_BIND".to_string(), policy.to_string()));
                    i += 2;
                }
                "-x" => {
                    env.extend(parse_export(value_of(args, i)?)?);
                    i += 2;
                }
                "-genv" | "--genv" => {
                    let name = checked_name(value_of(args, i)?)?;
                    let value = args
                        .get(i + 2)
                        .and_then(|v| v.to_str())
                        .ok_or("option '-genv' needs a name and a value")?;
                    env.push((name.to_string(), value.to_string()));
                    i += 3;
                }
                "--oversubscribe"
                | "-oversubscribe"
                | "--allow-run-as-root"
                | "-allow-run-as-root" => i += 1,
                "-h" | "--help" => return Ok(Action::Help),
                "-V" | "--version" => return Ok(Action::Version),
                "--" => {
                    i += 1;
                    break;
                }
                _ if arg.len() > 1 && arg.starts_with('-') => {
                    return Err(format!("unknown option '{arg}'"));
                }
                _ => break,
            }
        }
        let (program, rest) = args[i..].split_first().ok_or("missing program to run")?;
        let slots: usize = hosts.iter().map(|h: &(String, usize)| h.1).sum();
        let nranks = match (nranks, slots) {
            (Some(n), s) if s > 0 && n > s => {
                return Err(format!("-n {n} but --hosts gives only {s} slots"))
            }
            (Some(n), _) => n,
            (None, s) if s > 0 => s,
            (None, _) => return Err("missing -n N (the number of ranks)".into()),
        };
        Ok(Action::Run(Options {
            nranks,
            hosts,
            rsh,
            tag_output,
            timeout,
            env,
            program: program.clone(),
            args: rest.to_vec(),
        }))
    }

    /// The word after option `args[i]`, as text.
    fn value_of(args: &[OsString], i: usize) -> Result<&str, String> {
        let option = args[i].to_string_lossy();
        let value = args
            .get(i + 1)
            .ok_or_else(|| format!("option '{option}' needs a value"))?;
        value
            .to_str()
            .ok_or_else(|| format!("invalid value for option '{option}'"))
    }

    /// `a:2,b:3` (a host without `:N` has one slot).
    fn parse_hosts(text: &str) -> Result<Vec<(String, usize)>, String> {
        text.split(',')
            .map(|h| {
                let (name, n) = h.rsplit_once(':').unwrap_or((h, "1"));
                let ok_name = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
                match n.parse::<usize>() {
                    Ok(n) if n >= 1 && ok_name => Ok((name.to_string(), n)),
                    _ => Err(format!("invalid host '{h}' in --hosts (need NAME:N)")),
                }
            })
            .collect()
    }

    /// `--bind-to`'s policy as `FERROCOLL_BIND` spells it. Open MPI's
    /// `core` binds to a whole core, ours to one CPU the kernel lists (a
    /// hardware thread where a core has several), so `hwthread` is `core`.
    fn parse_bind(text: &str) -> Result<&'static str, String> {
        let (policy, qualifiers) = text.split_once(':').unwrap_or((text, ""));
        let known = ["overload-allowed", "if-supported"];
        if let Some(q) = qualifiers
            .split(',')
            .find(|q| !q.is_empty() && !known.contains(q))
        {
            return Err(format!("--bind-to: unknown qualifier '{q}' in '{text}'"));
        }
        match policy {
            "none" => Ok("none"),
            "core" | "hwthread" | "cpu" => Ok("core"),
            "block" => Ok("block"),
            "auto" => Ok("auto"),
            _ => Err(format!(
                "--bind-to {policy}: not supported (need none, core, hwthread, block or auto)"
            )),
        }
    }

    /// `-x NAME=VALUE`, or `-x NAME` with NAME's value here (nothing if it
    /// is not set: the ranks then lack it too).
    fn parse_export(text: &str) -> Result<Option<(String, String)>, String> {
        let (name, value) = match text.split_once('=') {
            Some((name, value)) => (checked_name(name)?, Some(value.to_string())),
            None => (checked_name(text)?, std::env::var(text).ok()),
        };
        Ok(value.map(|v| (name.to_string(), v)))
    }

    /// A variable's name: a letter or '_', then letters, digits and '_'.
    fn checked_name(name: &str) -> Result<&str, String> {
        let mut chars = name.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            Ok(name)
        } else {
            Err(format!("invalid variable name '{name}'"))
        }
    }

    fn parse_nranks(text: &str) -> Result<usize, String> {
        match text.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!(
                "invalid number of ranks '{text}' (need a positive integer)"
            )),
        }
    }

    fn parse_timeout(text: &str) -> Result<Timeout, String> {
        let limit = text
            .parse::<f64>()
            .ok()
            .filter(|secs| *secs > 0.0)
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
            .ok_or_else(|| {
                format!("invalid timeout '{text}' (need a positive number of seconds)")
            })?;
        Ok(Timeout {
            limit,
            text: text.to_string(),
        })
    }
}

/// The signals the supervisor waits for, collected synchronously with `sigtimedwait` instead
/// of handlers, so the reaction to a signal is ordinary code in the main loop.
mod signals {
    use libc::c_int;
    use std::mem::MaybeUninit;
    use std::time::Duration;

    /// Signals that ferrorun passes on to every rank.
    pub const FORWARDED: [c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    pub struct WaitSet {
        set: libc::sigset_t,
    }

    impl WaitSet {
        /// Blocks SIGCHLD and the forwarded signals in the calling thread (and the threads it
        /// starts later). A forwarded signal that ferrorun inherited as ignored (e.g. SIGHUP
        /// under `nohup`) stays ignored: blocking it would make the kernel queue it anyway.
        pub fn block() -> WaitSet {
            // SAFETY: sigemptyset initialises the set before use; sigaction with a null new
            // action only reads the current disposition; pthread_sigmask gets a valid set.
            unsafe {
                let mut set = MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigemptyset(set.as_mut_ptr());
                let mut set = set.assume_init();
                libc::sigaddset(&mut set, libc::SIGCHLD);
                for sig in FORWARDED {
                    let mut old = MaybeUninit::<libc::sigaction>::zeroed();
                    let queried = libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) == 0;
                    if !(queried && old.assume_init().sa_sigaction == libc::SIG_IGN) {
                        libc::sigaddset(&mut set, sig);
                    }
                }
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                WaitSet { set }
            }
        }

        /// Waits up to `timeout` for one of the signals; `None` when none arrived.
        pub fn wait(&self, timeout: Duration) -> Option<c_int> {
            let ts = libc::timespec {
                tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
                tv_nsec: timeout.subsec_nanos() as libc::c_long,
            };
            // SAFETY: the set was initialised in `block`; a null info pointer is allowed.
            let sig = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &ts) };
            (sig > 0).then_some(sig)
        }
    }

    /// The conventional name of a signal, for messages.
    pub fn name(sig: c_int) -> Option<&'static str> {
        const NAMES: [(c_int, &str); 30] = [
            (libc::SIGHUP, "SIGHUP"),
            (libc::SIGINT, "SIGINT"),
            (libc::SIGQUIT, "SIGQUIT"),
            (libc::SIGILL, "SIGILL"),
            (libc::SIGTRAP, "SIGTRAP"),
            (libc::SIGABRT, "SIGABRT"),
            (libc::SIGBUS, "SIGBUS"),
            (libc::SIGFPE, "SIGFPE"),
            (libc::SIGKILL, "SIGKILL"),
            (libc::SIGUSR1, "SIGUSR1"),
            (libc::SIGSEGV, "SIGSEGV"),
            (libc::SIGUSR2, "SIGUSR2"),
            (libc::SIGPIPE, "SIGPIPE"),
            (libc::SIGALRM, "SIGALRM"),
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGSTKFLT, "SIGSTKFLT"),
            (libc::SIGCHLD, "SIGCHLD"),
            (libc::SIGCONT, "SIGCONT"),
            (libc::SIGSTOP, "SIGSTOP"),
            (libc::SIGTSTP, "SIGTSTP"),
            (libc::SIGTTIN, "SIGTTIN"),
            (libc::SIGTTOU, "SIGTTOU"),
            (libc::SIGURG, "SIGURG"),
            (libc::SIGXCPU, "SIGXCPU"),
            (libc::SIGXFSZ, "SIGXFSZ"),
            (libc::SIGVTALRM, "SIGVTALRM"),
            (libc::SIGPROF, "SIGPROF"),
            (libc::SIGWINCH, "SIGWINCH"),
            (libc::SIGIO, "SIGIO"),
            (libc::SIGSYS, "SIGSYS"),
        ];
        NAMES.iter().find(|(s, _)| *s == sig).map(|(_, n)| *n)
    }
}

/// Starting, watching and stopping the ranks.
mod job {
    use crate::cli::{Options, Timeout};
    use crate::output::Forwarders;
    use crate::signals::{self, WaitSet};
    use crate::{EXIT_TIMEOUT, NAME};
    use ferrocoll::bootstrap::store::StoreServer;
    use ferrocoll::transport::tcp::auth::Secret;
    use ferrocoll::transport::tcp::mesh;
    use libc::{c_int, pid_t};
    use std::io::{self, Read};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    /// Time between SIGTERM and SIGKILL when the job is torn down.
    const KILL_GRACE: Duration = Duration::from_secs(1);
    /// Longest sleep of the main loop; a safety net should a SIGCHLD ever go missing.
    const POLL: Duration = Duration::from_millis(100);

    /// How a rank ended.
    #[derive(Clone, Copy)]
    enum Outcome {
        Exited(i32),
        Signaled { sig: c_int, core_dumped: bool },
    }

    impl Outcome {
        fn from_wait_status(status: c_int) -> Outcome {
            if libc::WIFSIGNALED(status) {
                Outcome::Signaled {
                    sig: libc::WTERMSIG(status),
                    core_dumped: libc::WCOREDUMP(status),
                }
            } else {
                Outcome::Exited(libc::WEXITSTATUS(status))
            }
        }

        fn failed(self) -> bool {
            !matches!(self, Outcome::Exited(0))
        }

        /// The shell convention: the exit code, or 128+S for signal S.
        fn exit_code(self) -> i32 {
            match self {
                Outcome::Exited(code) => code,
                Outcome::Signaled { sig, .. } => 128 + sig,
            }
        }

        fn describe(self) -> String {
            match self {
                Outcome::Exited(code) => format!("exited with code {code}"),
                Outcome::Signaled { sig, core_dumped } => {
                    let name = signals::name(sig).map(|n| format!(" ({n})"));
                    let core = if core_dumped { " (core dumped)" } else { "" };
                    format!("killed by signal {sig}{}{core}", name.unwrap_or_default())
                }
            }
        }
    }

    struct Rank {
        /// Also the rank's process group id: each rank leads its own group.
        pid: pid_t,
        outcome: Option<Outcome>,
    }

    pub struct Job {
        /// Serves the ranks' rendezvous until the job ends.
        _store: StoreServer,
        ranks: Vec<Rank>,
        /// The rank whose failure decides the exit code.
        first_failure: Option<usize>,
        /// A signal already forwarded on behalf of the user.
        forwarded: Option<c_int>,
        /// When the teardown (SIGTERM to every rank) began.
        stopping_since: Option<Instant>,
        kill_sent: bool,
        timed_out: bool,
        /// The user's signal, when its repetition made ferrorun kill the job.
        aborted_by: Option<c_int>,
        /// Set once the job ended through `supervise`; otherwise dropping it kills the ranks.
        finished: bool,
    }

    /// A unique hex job id: pid and clock make collisions on one host impossible in practice,
    /// the random bytes make the id unguessable for the shared-memory segment name.
    pub fn new_job_id() -> String {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u32)
            .unwrap_or(0);
        format!("{:08x}{nanos:08x}{:016x}", std::process::id(), random_u64())
    }

    fn random_u64() -> u64 {
        let mut bytes = [0u8; 8];
        let from_kernel =
            std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if from_kernel.is_ok() {
            return u64::from_ne_bytes(bytes);
        }
        // std seeds RandomState from the OS too, by other means than the device file.
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.finish()
    }

    impl Job {
        /// Starts every rank; on failure the ranks already started are killed (by `Drop`).
        pub fn start(opts: &Options, job_id: &str, output: &mut Forwarders) -> io::Result<Job> {
            // The rendezvous store through which ranks find each other's TCP
            // addresses, and the secret that authenticates every connection.
            let secret = Secret::random().map_err(io::Error::other)?;
            // Ranks on other hosts must reach it: then it listens on the
            // chosen interface (FERROCOLL_SOCKET_IFNAME), else on loopback.
            let ip = if opts.hosts.is_empty() {
                [127, 0, 0, 1].into()
            } else {
                let filter = std::env::var("FERROCOLL_SOCKET_IFNAME").ok();
                mesh::choose_ip(filter.as_deref(), false).map_err(io::Error::other)?
            };
            let store =
                StoreServer::start((ip, 0).into(), secret.clone()).map_err(io::Error::other)?;
            let rendezvous = (store.addr().to_string(), secret.to_hex());
            let mut job = Job {
                _store: store,
                ranks: Vec::with_capacity(opts.nranks),
                first_failure: None,
                forwarded: None,
                stopping_since: None,
                kill_sent: false,
                timed_out: false,
                aborted_by: None,
                finished: false,
            };
            let rank0_stdin = Rank0Stdin::choose();
            for rank in 0..opts.nranks {
                let stdin = if rank == 0 {
                    rank0_stdin.stdio()
                } else {
                    Stdio::null()
                };
                let mut cmd = if opts.hosts.is_empty() {
                    let mut c = rank_command(opts, rank, job_id, stdin);
                    c.env("FERROCOLL_STORE", &rendezvous.0)
                        .env("FERROCOLL_SECRET", &rendezvous.1);
                    c
                } else {
                    remote_command(opts, rank, job_id, stdin, &rendezvous)?
                };
                let mut child = cmd.spawn()?;
                job.ranks.push(Rank {
                    pid: child.id() as pid_t,
                    outcome: None,
                });
                if let Some(stdin) = child.stdin.take() {
                    crate::output::forward_stdin(stdin);
                }
                if opts.tag_output {
                    output.watch(rank, &mut child);
                }
                // The Child handle is dropped without waiting: ranks are reaped by `reap`.
            }
            Ok(job)
        }

        /// Supervises the job until it is over and returns ferrorun's exit code.
        pub fn supervise(&mut self, signals: &WaitSet, timeout: Option<&Timeout>) -> i32 {
            let deadline = timeout.map(|t| Instant::now() + t.limit);
            loop {
                self.reap();
                if self.is_over() {
                    break;
                }
                let now = Instant::now();
                if let (Some(deadline), Some(t)) = (deadline, timeout) {
                    if now >= deadline && self.stopping_since.is_none() {
                        eprintln!(
                            "{NAME}: job exceeded timeout of {} s; killing ranks",
                            t.text
                        );
                        self.timed_out = true;
                        self.begin_stop(now);
                    }
                }
                if let Some(since) = self.stopping_since {
                    if !self.kill_sent && now >= since + KILL_GRACE {
                        self.signal_all(libc::SIGKILL);
                        self.kill_sent = true;
                    }
                }
                if let Some(sig) = signals.wait(self.next_wait(now, deadline)) {
                    if sig != libc::SIGCHLD {
                        self.on_user_signal(sig);
                    }
                }
            }
            self.finished = true;
            self.exit_code()
        }

        /// Collects every rank that has ended, without blocking.
        fn reap(&mut self) {
            loop {
                let mut status: c_int = 0;
                // SAFETY: waitpid writes only to `status`.
                let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if pid <= 0 {
                    return;
                }
                if let Some(rank) = self.ranks.iter().position(|r| r.pid == pid) {
                    self.on_rank_end(rank, Outcome::from_wait_status(status));
                }
            }
        }

        fn on_rank_end(&mut self, rank: usize, outcome: Outcome) {
            self.ranks[rank].outcome = Some(outcome);
            // Once the teardown began, deaths are ferrorun's own doing, not a cause.
            if !outcome.failed() || self.stopping_since.is_some() {
                return;
            }
            self.first_failure = Some(rank);
            // Dying of the very signal the user sent is expected, not news.
            let expected =
                matches!(outcome, Outcome::Signaled { sig, .. } if Some(sig) == self.forwarded);
            if !expected {
                let others = if self.ranks.iter().any(|r| r.outcome.is_none()) {
                    "; terminating the other ranks"
                } else {
                    ""
                };
                let pid = self.ranks[rank].pid;
                eprintln!(
                    "{NAME}: rank {rank} (pid {pid}) {}{others}",
                    outcome.describe()
                );
            }
            self.begin_stop(Instant::now());
        }

        /// SIGINT/SIGTERM/SIGHUP sent to ferrorun: pass it on, and let the ranks decide what
        /// to do with it. Another one after that (or during a teardown) means "kill it now".
        fn on_user_signal(&mut self, sig: c_int) {
            if self.forwarded.is_none() && self.stopping_since.is_none() {
                self.forwarded = Some(sig);
                self.signal_all(sig);
                return;
            }
            if !self.kill_sent {
                let name = signals::name(sig).unwrap_or("a signal");
                eprintln!("{NAME}: received {name}; killing ranks now");
                self.aborted_by = self.aborted_by.or(self.forwarded);
                self.stopping_since.get_or_insert_with(Instant::now);
                self.signal_all(libc::SIGKILL);
                self.kill_sent = true;
            }
        }

        /// SIGTERM to every rank now; `supervise` sends SIGKILL after `KILL_GRACE`.
        fn begin_stop(&mut self, now: Instant) {
            self.stopping_since = Some(now);
            self.signal_all(libc::SIGTERM);
        }

        /// Signals the process group of every rank, ended ones included, because a rank's
        /// children may outlive it. A group id stays reserved while the group has members; once
        /// empty, its number could only name another group after the kernel's pid counter
        /// wrapped around, which does not happen in the second or two of a teardown.
        fn signal_all(&self, sig: c_int) {
            for rank in &self.ranks {
                // SAFETY: kill has no memory effects; ESRCH (group gone) is expected.
                unsafe { libc::kill(-rank.pid, sig) };
            }
        }

        fn any_group_alive(&self) -> bool {
            // SAFETY: signal 0 only checks that the group exists.
            self.ranks
                .iter()
                .any(|r| unsafe { libc::kill(-r.pid, 0) } == 0)
        }

        /// Over when every rank was reaped and, during a teardown, the ranks' own children
        /// are gone too (or have been sent SIGKILL, which they cannot survive).
        fn is_over(&self) -> bool {
            let all_reaped = self.ranks.iter().all(|r| r.outcome.is_some());
            all_reaped
                && (self.stopping_since.is_none() || self.kill_sent || !self.any_group_alive())
        }

        /// How long the main loop may sleep before it has something to do.
        fn next_wait(&self, now: Instant, deadline: Option<Instant>) -> Duration {
            let mut wait = POLL;
            if let Some(since) = self.stopping_since {
                if !self.kill_sent {
                    wait = wait.min((since + KILL_GRACE).saturating_duration_since(now));
                }
            } else if let Some(deadline) = deadline {
                wait = wait.min(deadline.saturating_duration_since(now));
            }
            wait
        }

        fn exit_code(&self) -> i32 {
            match self.first_failure {
                Some(rank) => self.ranks[rank].outcome.map_or(1, Outcome::exit_code),
                None if self.timed_out => EXIT_TIMEOUT,
                None => self.aborted_by.map_or(0, |sig| 128 + sig),
            }
        }
    }

    impl Drop for Job {
        /// Reached without `finished` only when starting failed or ferrorun panicked: leave no
        /// rank behind.
        fn drop(&mut self) {
            if !self.finished {
                self.signal_all(libc::SIGKILL);
            }
        }
    }

    /// The command for one rank: the program in its own process group, with the protocol's
    /// environment on top of ferrorun's own.
    fn rank_command(opts: &Options, rank: usize, job_id: &str, stdin: Stdio) -> Command {
        let mut cmd = Command::new(&opts.program);
        let size = opts.nranks.to_string();
        let launcher = std::process::id();
        cmd.args(&opts.args)
            .envs(opts.env.iter().map(|(k, v)| (k, v)))
            .env("FERROCOLL_RANK", rank.to_string())
            .env("FERROCOLL_SIZE", &size)
            .env("FERROCOLL_LOCAL_RANK", rank.to_string())
            .env("FERROCOLL_LOCAL_SIZE", &size)
            .env("FERROCOLL_JOB", job_id)
            .env("FERROCOLL_LAUNCHER_PID", launcher.to_string());
        supervised(cmd, opts, stdin)
    }

    /// What every rank's process gets: its own process group, stdin, piped
    /// output under `--tag-output`, and death with the launcher.
    fn supervised(mut cmd: Command, opts: &Options, stdin: Stdio) -> Command {
        let launcher = std::process::id();
        cmd.process_group(0).stdin(stdin);
        if opts.tag_output {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls (sigprocmask, prctl, getppid), without allocating or taking locks.
        unsafe {
            cmd.pre_exec(move || die_with_launcher(launcher));
        }
        cmd
    }

    /// Rank `rank` of a `--hosts` job: the remote shell (`opts.rsh`, with
    /// `{host}` replaced or the host appended) running one shell word that
    /// changes to this directory and starts the program with the rank's
    /// environment: every FERROCOLL_* setting here, those of `-x`, `-genv`
    /// and `--bind-to`, and ferrorun's own variables, later ones winning.
    fn remote_command(
        opts: &Options,
        rank: usize,
        job_id: &str,
        stdin: Stdio,
        rendezvous: &(String, String),
    ) -> io::Result<Command> {
        let mut first = 0;
        let (host, slots, local) = opts
            .hosts
            .iter()
            .find_map(|(h, n)| {
                let at = (rank < first + n).then(|| (h.as_str(), *n, rank - first));
                first += n;
                at
            })
            .ok_or_else(|| io::Error::other(format!("no host slot for rank {rank}")))?;
        // The last host may hold fewer ranks than its slots when -n is smaller.
        let on_host = slots.min(opts.nranks - (first - slots));
        let mut vars: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k.starts_with("FERROCOLL_"))
            .collect();
        vars.extend(opts.env.iter().cloned());
        vars.extend(
            [
                ("FERROCOLL_RANK", rank.to_string()),
                ("FERROCOLL_SIZE", opts.nranks.to_string()),
                ("FERROCOLL_LOCAL_RANK", local.to_string()),
                ("FERROCOLL_LOCAL_SIZE", on_host.to_string()),
                ("FERROCOLL_JOB", job_id.to_string()),
                ("FERROCOLL_MULTIHOST", "1".to_string()),
                ("FERROCOLL_STORE", rendezvous.0.clone()),
                ("FERROCOLL_SECRET", rendezvous.1.clone()),
            ]
            .map(|(k, v)| (k.to_string(), v)),
        );
        let cwd = std::env::current_dir()?;
        let mut line = format!("cd {} && exec env", quote(&cwd.to_string_lossy()));
        for (k, v) in &vars {
            line.push_str(&format!(" {k}={}", quote(v)));
        }
        line.push(' ');
        line.push_str(&quote(&opts.program.to_string_lossy()));
        for a in &opts.args {
            line.push(' ');
            line.push_str(&quote(&a.to_string_lossy()));
        }
        let mut words: Vec<String> = opts
            .rsh
            .split_whitespace()
            .map(|w| w.replace("{host}", host))
            .collect();
        if !opts.rsh.contains("{host}") {
            words.push(host.to_string());
        }
        words.push(line);
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..]);
        Ok(supervised(cmd, opts, stdin))
    }

    /// One word for a POSIX shell.
    fn quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', "'\\''"))
    }

    /// In the child before exec: the rank starts with no signal blocked (ferrorun blocks the
    /// ones it waits for, and the mask survives exec: a rank that inherited it never received
    /// the SIGTERM ferrorun forwards); and if ferrorun is killed outright (SIGKILL, no chance
    /// to clean up), the kernel kills the rank instead of leaving it running.
    fn die_with_launcher(launcher: u32) -> io::Result<()> {
        // SAFETY: sigemptyset initialises the set before sigprocmask reads it; the other calls
        // take no pointers. All are async-signal-safe.
        unsafe {
            let mut none = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigemptyset(none.as_mut_ptr());
            if libc::sigprocmask(libc::SIG_SETMASK, none.as_ptr(), std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The launcher may have died before prctl took effect.
            if libc::getppid() as u32 != launcher {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        Ok(())
    }

    /// What rank 0 reads as standard input. Ranks run in their own process groups, which
    /// are background groups of ferrorun's terminal: reading the terminal directly would
    /// stop them with SIGTTIN. So a terminal is relayed through a pipe by ferrorun.
    enum Rank0Stdin {
        Inherit,
        Relay,
        Null,
    }

    impl Rank0Stdin {
        fn choose() -> Rank0Stdin {
            // SAFETY: queries on file descriptor 0 without memory effects.
            let (tty, foreground) = unsafe {
                let tty = libc::isatty(0) == 1;
                (tty, tty && libc::tcgetpgrp(0) == libc::getpgrp())
            };
            match (tty, foreground) {
                (false, _) => Rank0Stdin::Inherit,
                (true, true) => Rank0Stdin::Relay,
                // A background ferrorun reading the terminal would itself be stopped.
                (true, false) => Rank0Stdin::Null,
            }
        }

        fn stdio(&self) -> Stdio {
            match self {
                Rank0Stdin::Inherit => Stdio::inherit(),
                Rank0Stdin::Relay => Stdio::piped(),
                Rank0Stdin::Null => Stdio::null(),
            }
        }
    }
}

/// Relaying the ranks' output with `--tag-output`, and a terminal's input to rank 0.
mod output {
    use std::io::{self, Read, Write};
    use std::process::{Child, ChildStdin};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
    use std::sync::Arc;
    use std::thread;
    use std::time::{Duration, Instant};

    /// A line longer than this is passed on in pieces, so a rank that never writes a newline
    /// cannot make ferrorun's memory grow without bound.
    const MAX_LINE: usize = 64 * 1024;
    /// After the ranks ended, how long output may stall before ferrorun stops waiting for it
    /// (a rank's background child may hold the pipe open forever).
    const DRAIN_STALL: Duration = Duration::from_secs(1);

    #[derive(Clone, Copy)]
    enum Stream {
        Stdout,
        Stderr,
    }

    /// One thread per rank and stream, each reporting on `done` when its pipe reaches EOF.
    pub struct Forwarders {
        done_tx: Sender<()>,
        done_rx: Receiver<()>,
        running: usize,
        /// Bytes relayed so far, to tell a slow drain from a stalled one.
        progress: Arc<AtomicU64>,
    }

    impl Forwarders {
        pub fn new() -> Forwarders {
            let (done_tx, done_rx) = mpsc::channel();
            Forwarders {
                done_tx,
                done_rx,
                running: 0,
                progress: Arc::new(AtomicU64::new(0)),
            }
        }

        /// Starts relaying the piped stdout and stderr of `child` with a `[rank] ` prefix.
        pub fn watch(&mut self, rank: usize, child: &mut Child) {
            if let Some(out) = child.stdout.take() {
                self.spawn(rank, out, Stream::Stdout);
            }
            if let Some(err) = child.stderr.take() {
                self.spawn(rank, err, Stream::Stderr);
            }
        }

        fn spawn(&mut self, rank: usize, source: impl Read + Send + 'static, stream: Stream) {
            let done = self.done_tx.clone();
            let progress = Arc::clone(&self.progress);
            self.running += 1;
            thread::spawn(move || {
                relay_tagged(rank, source, stream, &progress);
                let _ = done.send(());
            });
        }

        /// Waits until every pipe reached EOF, or output stalled for `DRAIN_STALL`.
        pub fn finish(mut self) {
            let mut last_progress = self.progress.load(Ordering::Relaxed);
            let mut stalled_since = Instant::now();
            while self.running > 0 {
                match self.done_rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(()) => self.running -= 1,
                    Err(RecvTimeoutError::Timeout) => {
                        let now = self.progress.load(Ordering::Relaxed);
                        if now != last_progress {
                            last_progress = now;
                            stalled_since = Instant::now();
                        } else if stalled_since.elapsed() >= DRAIN_STALL {
                            return;
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        }
    }

    /// Copies `source` to ferrorun's `stream`, prefixing each line with `[rank] `. Complete
    /// lines go out in one locked write, so lines of different ranks never mix.
    fn relay_tagged(rank: usize, mut source: impl Read, stream: Stream, progress: &AtomicU64) {
        let prefix = format!("[{rank}] ");
        let mut pending = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let n = match source.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            pending.extend_from_slice(&chunk[..n]);
            let cut = match pending.iter().rposition(|&b| b == b'\n') {
                Some(last_newline) => last_newline + 1,
                None if pending.len() >= MAX_LINE => pending.len(),
                None => continue,
            };
            let rest = pending.split_off(cut);
            // If ferrorun's own output is gone, close the pipe too: the rank then sees
            // EPIPE/SIGPIPE just as it would without --tag-output.
            if emit(stream, &tag_lines(&prefix, &pending)).is_err() {
                return;
            }
            progress.fetch_add(pending.len() as u64, Ordering::Relaxed);
            pending = rest;
        }
        if !pending.is_empty() {
            let _ = emit(stream, &tag_lines(&prefix, &pending));
        }
    }

    /// Prefixes every line of `text`; a final line without newline gets one, so the next
    /// tagged line starts on a line of its own.
    fn tag_lines(prefix: &str, text: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len() + prefix.len() * 4);
        for line in text.split_inclusive(|&b| b == b'\n') {
            out.extend_from_slice(prefix.as_bytes());
            out.extend_from_slice(line);
        }
        if out.last() != Some(&b'\n') {
            out.push(b'\n');
        }
        out
    }

    fn emit(stream: Stream, bytes: &[u8]) -> io::Result<()> {
        match stream {
            Stream::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Stream::Stderr => io::stderr().lock().write_all(bytes),
        }
    }

    /// Relays ferrorun's standard input to rank 0 until either side closes. The thread is
    /// never joined: it may sit in a terminal read when the job ends.
    pub fn forward_stdin(mut rank0: ChildStdin) {
        thread::spawn(move || {
            let _ = io::copy(&mut io::stdin().lock(), &mut rank0);
        });
    }
}

/// The safety net for the library's shared memory.
mod shm {
    /// On drop, removes `/dev/shm/ferrocoll-<job>*`. The library unlinks its segment once all
    /// ranks mapped it, so this matters only when a rank died before that.
    pub struct Cleanup<'a> {
        pub job_id: &'a str,
    }

    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            let prefix = format!("ferrocoll-{}", self.job_id);
            let Ok(entries) = std::fs::read_dir("/dev/shm") else {
                return;
            };
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }
}
