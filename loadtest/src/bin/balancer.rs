//! `balancer`: several gateway replicas behind one address, as a load balancer puts them, for the
//! replica-loss load test (`scripts/loadtest-replicas.sh`). Each new connection goes to the next backend
//! in turn; a backend that refuses the connection (a killed replica) is skipped, so the run goes on on the
//! others, and connections already open to it break as they would behind a real balancer.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use clap::Parser;
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Parser)]
#[command(name = "balancer", about = "Round-robin TCP balancer over gateway replicas (load tests only)")]
struct Cli {
    #[arg(long)]
    listen: SocketAddr,
    /// Backends, comma-separated (`127.0.0.1:8081,127.0.0.1:8082`).
    #[arg(long, value_delimiter = ',', required = true)]
    backends: Vec<SocketAddr>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let listener = TcpListener::bind(cli.listen).await?;
    eprintln!("balancer: {} -> {:?}", listener.local_addr()?, cli.backends);
    let backends: Arc<[SocketAddr]> = cli.backends.into();
    let next = Arc::new(AtomicUsize::new(0));
    loop {
        let (mut client, _) = listener.accept().await?;
        let _ = client.set_nodelay(true);
        let (backends, next) = (Arc::clone(&backends), Arc::clone(&next));
        tokio::spawn(async move {
            let first = next.fetch_add(1, Ordering::Relaxed);
            for i in 0..backends.len() {
                let backend = backends[(first + i) % backends.len()];
                if let Ok(mut upstream) = TcpStream::connect(backend).await {
                    let _ = upstream.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    return;
                }
            }
            // No backend: the client sees its connection closed.
        });
    }
}
