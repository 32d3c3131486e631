//! External services the tests start on loopback (PostgreSQL), and the
//! failure that names the package to install when one is missing.

use std::path::PathBuf;

/// A PostgreSQL server of Debian's `postgresql` package, started for a test
/// on loopback in a directory of its own (`initdb`, `pg_ctl`), stopped and
/// removed when dropped.
pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    /// `pg_ctl`'s `-o`: the port, socket folder and settings.
    options: String,
    /// Running as root: PostgreSQL's programs run as `postgres`.
    root: bool,
    /// `postgres://postgres@127.0.0.1:PORT/toolhost`.
    pub url: String,
}

impl Postgres {
    /// Start one. PostgreSQL is required: without it the test fails,
    /// naming the package to install (`.ci/run` installs it).
    pub fn start(name: &str) -> Postgres {
        Postgres::start_if_installed(name).unwrap_or_else(|| {
            panic!("{}", missing_service("PostgreSQL (/usr/lib/postgresql/*/bin/initdb)", "postgresql"))
        })
    }

    /// Start one, or `None` where PostgreSQL is not installed: for a
    /// benchmark, which then prints that it skipped its PostgreSQL part.
    pub fn start_if_installed(name: &str) -> Option<Postgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|versions| versions.filter_map(Result::ok).map(|v| v.path().join("bin")).max())
            .filter(|bin| bin.join("initdb").exists())?;
        let dir = std::env::temp_dir().join(format!("toolhost-pg-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir).expect("a directory for PostgreSQL");
        // PostgreSQL will not run as root: as root, run it as `postgres`.
        let root = std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if root {
            let status = std::process::Command::new("chown").args(["-R", "postgres:"]).arg(&dir).status();
            assert!(status.is_ok_and(|s| s.success()), "chown the PostgreSQL directory");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
        let options = format!("-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=on", dir.display());
        let url = format!("postgres://postgres@127.0.0.1:{port}/toolhost");
        let postgres = Postgres { url, dir, bin, options, root };
        let run = |program: &str, args: &[&str]| {
            let output = postgres.command(program).args(args).output().expect("run a PostgreSQL program");
            assert!(
                output.status.success(),
                "{program} failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        };
        let data_arg = postgres.dir.join("data").display().to_string();
        run("initdb", &["-D", &data_arg, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
        postgres.start_again();
        let port_arg = port.to_string();
        run("createdb", &["-h", "127.0.0.1", "-p", &port_arg, "-U", "postgres", "toolhost"]);
        Some(postgres)
    }

    /// Stop the server (fast shutdown: its clients are cut off), keeping
    /// its data; [`Postgres::start_again`] brings it back.
    pub fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "-w", "-t", "60", "stop"]);
    }

    /// Start the server (again) on its data, port and settings.
    pub fn start_again(&self) {
        let log = self.dir.join("log").display().to_string();
        self.pg_ctl(&["-o", &self.options, "-l", &log, "-w", "-t", "60", "start"]);
    }

    /// `pg_ctl -D DATA ARGS`, which must succeed.
    fn pg_ctl(&self, args: &[&str]) {
        let data = self.dir.join("data");
        let output = self.command("pg_ctl").arg("-D").arg(&data).args(args).output().expect("run pg_ctl");
        assert!(
            output.status.success(),
            "pg_ctl {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// One of PostgreSQL's programs, to run as `postgres` when root.
    fn command(&self, program: &str) -> std::process::Command {
        if self.root {
            let mut command = std::process::Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(self.bin.join(program));
            command
        } else {
            std::process::Command::new(self.bin.join(program))
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self.command("pg_ctl").arg("-D").arg(&data).args(["-m", "immediate", "-w", "stop"]).output();
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// Why a test that needs an external service fails without it: what is
/// missing and the Debian package that brings it. The suite never skips
/// such a test, so a green run has run them all.
pub fn missing_service(what: &str, package: &str) -> String {
    format!("{what} is not installed: this test needs it (Debian: apt-get install {package}; .ci/run installs it)")
}

/// The first of `paths` that is a file: the program an external service
/// runs as; the test fails, naming the package, when none is.
pub fn required_program(paths: &[&str], what: &str, package: &str) -> std::path::PathBuf {
    paths
        .iter()
        .map(std::path::PathBuf::from)
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{}", missing_service(what, package)))
}
