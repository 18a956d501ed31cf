//! A real S3-compatible server for tests: Ceph's radosgw on a throwaway one-node cluster
//! (`scripts/s3-server.sh serve`), with a bucket and a user of its own. It stops, and its objects go,
//! when the test process ends however it ends: the script waits on a pipe only this process holds.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

use crate::repo_root;

/// A running S3 server and what a client needs to reach it.
pub struct S3Server {
    pub endpoint: String,
    pub bucket: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    dir: PathBuf,
    _child: Mutex<(Child, ChildStdin)>,
}

impl S3Server {
    /// Starts one (about 15 s; the script installs radosgw from Debian's packages where it is missing).
    #[must_use]
    pub fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("runaii-s3-{}-{}", std::process::id(), next_id()));
        let mut child = Command::new(repo_root().join("scripts/s3-server.sh"))
            .arg("serve")
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run scripts/s3-server.sh: {e}"));
        let stdin = child.stdin.take().unwrap();
        let mut env = std::collections::HashMap::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some((name, value)) = line.split_once('=') {
                env.insert(name.to_owned(), value.to_owned());
            }
            if env.len() == 4 {
                break;
            }
        }
        let mut take = |name: &str| {
            env.remove(name).unwrap_or_else(|| panic!("scripts/s3-server.sh did not start (no {name}); logs in {}", dir.display()))
        };
        let (endpoint, bucket) = (take("RUNAII_S3_ENDPOINT"), take("RUNAII_S3_BUCKET"));
        let (access_key_id, secret_access_key) = (take("RUNAII_S3_ACCESS_KEY_ID"), take("RUNAII_S3_SECRET_ACCESS_KEY"));
        Self { endpoint, bucket, access_key_id, secret_access_key, dir, _child: Mutex::new((child, stdin)) }
    }

    /// Stops the HTTP front (radosgw) alone: the store stops answering, its objects stay.
    pub fn stop_gateway(&self) {
        self.script("stop-gateway");
    }

    /// Starts the HTTP front again, on the same port, and waits until it answers.
    pub fn start_gateway(&self) {
        self.script("start-gateway");
    }

    fn script(&self, command: &str) {
        let status = Command::new(repo_root().join("scripts/s3-server.sh")).arg(command).arg(&self.dir).status().unwrap();
        assert!(status.success(), "scripts/s3-server.sh {command} failed");
    }
}

fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
