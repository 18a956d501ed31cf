//! How gateways and workers reach Redis: one server, or a Redis Cluster when the URL lists several nodes
//! separated by commas (`redis://a:7000,redis://b:7001,redis://c:7002`). Both sides must agree, or a
//! worker would announce where no gateway reads; so the rule lives here, once.
//!
//! Every key the two use names its hash slot (`{registry}`, `{key id}`), so a script or a pair of keys
//! never spans nodes.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// Where Redis is, parsed once; [`Target::connect`] makes a connection that reconnects by itself.
#[derive(Clone)]
pub enum Target {
    Single(redis::Client),
    Cluster(ClusterClient),
}

impl std::fmt::Debug for Target {
    // The URLs may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_cluster() { "Target::Cluster(..)" } else { "Target::Single(..)" })
    }
}

impl Target {
    /// `timeout` bounds connecting and each command.
    ///
    /// # Errors
    /// A malformed URL (an unreachable Redis is not an error here).
    pub fn open(url: &str, timeout: Duration) -> RedisResult<Self> {
        let nodes: Vec<&str> = url.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
        match nodes.as_slice() {
            [one] => Ok(Self::Single(redis::Client::open(*one)?)),
            // Empty: the client's own error names what is wrong.
            [] => Ok(Self::Single(redis::Client::open(url)?)),
            _ => Ok(Self::Cluster(ClusterClient::builder(nodes).connection_timeout(timeout).response_timeout(timeout).retries(1).build()?)),
        }
    }

    #[must_use]
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// # Errors
    /// Redis unreachable, or (cluster) its slots could not be read.
    pub async fn connect(&self, timeout: Duration) -> RedisResult<Connection> {
        match self {
            Self::Single(client) => {
                let config =
                    ConnectionManagerConfig::new().set_connection_timeout(timeout).set_response_timeout(timeout).set_number_of_retries(1);
                Ok(Connection::Single(ConnectionManager::new_with_config(client.clone(), config).await?))
            }
            Self::Cluster(client) => Ok(Connection::Cluster(client.get_async_connection().await?)),
        }
    }
}

/// A connection to either kind; cheap to clone (both are multiplexed handles).
#[derive(Clone)]
pub enum Connection {
    Single(ConnectionManager),
    /// Routes each command to the node that owns its key's slot, following `MOVED` on resharding.
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if matches!(self, Self::Cluster(_)) { "Connection::Cluster" } else { "Connection::Single" })
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(&'a mut self, cmd: &'a Pipeline, offset: usize, count: usize) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_nodes_is_a_cluster_and_one_url_is_not() {
        let t = Duration::from_millis(100);
        assert!(!Target::open("redis://127.0.0.1:6379", t).unwrap().is_cluster());
        assert!(!Target::open("redis://127.0.0.1:6379,", t).unwrap().is_cluster());
        assert!(Target::open("redis://127.0.0.1:7000, redis://127.0.0.1:7001", t).unwrap().is_cluster());
        assert!(Target::open("not a url", t).is_err());
    }

    #[test]
    fn debug_never_prints_the_url() {
        let target = Target::open("redis://:hunter2@127.0.0.1:6379", Duration::from_millis(100)).unwrap();
        assert!(!format!("{target:?}").contains("hunter2"));
    }
}
