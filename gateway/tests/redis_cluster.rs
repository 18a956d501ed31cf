//! The gateway and its workers on a Redis Cluster: a local three-node cluster, started by the test, holds
//! the worker registry (a worker announces there and the gateway routes to it, with nothing else to go
//! on) and the rate-limit buckets (two keys whose buckets live on different nodes are each limited).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{client, spawn_app_with, start_worker};
use serde_json::{json, Value};

/// Three `redis-server`s in cluster mode, slots split between them; killed when dropped.
struct Cluster {
    ports: Vec<u16>,
    nodes: Vec<Child>,
    dir: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Cluster {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("runaii-redis-cluster-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let ports: Vec<u16> = (0..3).map(|_| runaii_testkit::free_port()).collect();
        let nodes = ports
            .iter()
            .map(|port| {
                Command::new("redis-server")
                    .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--cluster-enabled", "yes"])
                    .args(["--cluster-config-file", &format!("nodes-{port}.conf"), "--save", "", "--appendonly", "no"])
                    .current_dir(&dir)
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("redis-server on PATH (Debian: apt-get install redis-server)")
            })
            .collect();
        let cluster = Self { ports, nodes, dir };
        for port in &cluster.ports {
            cluster.wait_for(*port, "PING", "PONG");
        }
        let addresses: Vec<String> = cluster.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .unwrap();
        assert!(created.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&created.stdout));
        for port in &cluster.ports {
            cluster.wait_for(*port, "CLUSTER INFO", "cluster_state:ok");
        }
        cluster
    }

    fn cli(port: u16, command: &str) -> String {
        let out = Command::new("redis-cli").args(["-c", "-p", &port.to_string()]).args(command.split(' ')).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn wait_for(&self, port: u16, command: &str, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !Self::cli(port, command).contains(want) {
            assert!(Instant::now() < deadline, "redis on {port} never answered {want} to {command}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The URL form gateways and workers take for a cluster: every node, comma-separated.
    fn url(&self) -> String {
        self.ports.iter().map(|p| format!("redis://127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
    }

    /// The node (port) that owns `key`'s hash slot: the one that answers for it instead of redirecting.
    fn owner(&self, key: &str) -> u16 {
        let owners: Vec<u16> = self
            .ports
            .iter()
            .copied()
            .filter(|port| {
                let out = Command::new("redis-cli").args(["-p", &port.to_string(), "TYPE", key]).output().unwrap();
                !String::from_utf8_lossy(&out.stdout).contains("MOVED")
            })
            .collect();
        assert_eq!(owners.len(), 1, "exactly one node owns {key}: {owners:?}");
        owners[0]
    }
}

fn tiny(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0})
}

#[tokio::test]
async fn registry_and_rate_limits_work_on_a_three_node_cluster() {
    let cluster = Cluster::start();
    let url = cluster.url();
    let app = spawn_app_with(|s| s.redis_url = url.clone().into()).await;
    // A model no static URL serves: only the registry, on the cluster, can route to its worker.
    let model = format!("clustered-{}", uuid::Uuid::now_v7().simple());
    let price = |s: &str| s.parse().unwrap();
    app.upsert_model(&model, (price("0.1"), price("0.3")), None).await;
    let _worker = start_worker(&["--model-id", &model, "--announce-redis-url", &url]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m: Value = client().get(format!("{}/v1/models/{model}", app.base)).send().await.unwrap().json().await.unwrap();
        if m["is_ready"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "the worker announced on the cluster never became ready: {m}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let registry_node = cluster.owner(runaii_wire::announcement::REGISTRY_KEY);
    assert!(Cluster::cli(registry_node, &format!("HKEYS {}", runaii_wire::announcement::REGISTRY_KEY)).contains(&model));

    // Two keys, each limited to 2 requests a minute; keys are made until their buckets sit on two
    // different nodes, so the limiter's script is shown to run wherever a bucket lives.
    sqlx::query("UPDATE api_keys SET rpm_limit = 2").execute(&app.db).await.unwrap();
    let mut keys = vec![(app.key.clone(), bucket_node(&cluster, &app.db, &app.key).await)];
    while keys.len() < 2 {
        let key = common::create_key(&app.db, &app.tenant).await;
        sqlx::query("UPDATE api_keys SET rpm_limit = 2").execute(&app.db).await.unwrap();
        let node = bucket_node(&cluster, &app.db, &key).await;
        if node != keys[0].1 {
            keys.push((key, node));
        }
    }
    tokio::time::sleep(Duration::from_millis(400)).await; // the key cache lives 300 ms in tests
    for (key, node) in &keys {
        for _ in 0..2 {
            let r = app.post_as(key, "/v1/chat/completions", &tiny(&model), &[]).await;
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        }
        let third = app.post_as(key, "/v1/chat/completions", &tiny(&model), &[]).await;
        assert_eq!(third.status(), 429, "the third request a minute is refused (bucket on node {node})");
        let body: Value = third.json().await.unwrap();
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    }
}

/// The node holding a key's rate-limit buckets: `runaii:rl:…:{<key id>}`.
async fn bucket_node(cluster: &Cluster, db: &sqlx::PgPool, key: &str) -> u16 {
    let public_id = key.split('-').nth(1).unwrap();
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM api_keys WHERE public_id = $1").bind(public_id).fetch_one(db).await.unwrap();
    cluster.owner(&format!("{{{id}}}"))
}
