//! A Batch API input as it uploads: JSON Lines, one request per line in OpenAI's shape
//! (`{"custom_id", "method": "POST", "url", "body"}`), checked as the bytes arrive so that a malformed
//! file is refused at upload, naming its line, rather than accepted and failed later. Whether each body is
//! a request its endpoint accepts is the batch's own check when it is created.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Map, Value};

/// OpenAI's most requests in one batch.
pub const MAX_REQUESTS: usize = 50_000;
/// The longest `custom_id`, in bytes.
pub const MAX_CUSTOM_ID: usize = 512;
/// The endpoints a batch runs.
pub const ENDPOINTS: [&str; 2] = ["/v1/chat/completions", "/v1/responses"];

/// One request of a batch input.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputLine {
    pub custom_id: String,
    pub method: String,
    pub url: String,
    pub body: Map<String, Value>,
}

impl InputLine {
    /// The line's request, or why it is not one a batch runs.
    ///
    /// # Errors
    /// Not JSON, not the shape above, or a method or endpoint a batch does not run.
    pub fn parse(line: &[u8]) -> Result<Self, String> {
        let parsed: Self = serde_json::from_slice(line).map_err(|e| format!("it is not a batch request ({e})"))?;
        if parsed.custom_id.is_empty() || parsed.custom_id.len() > MAX_CUSTOM_ID {
            return Err(format!("its custom_id must be 1 to {MAX_CUSTOM_ID} bytes"));
        }
        if parsed.method != "POST" {
            return Err(format!("its method is '{}'; a batch request's is POST", parsed.method));
        }
        if !ENDPOINTS.contains(&parsed.url.as_str()) {
            return Err(format!("its url is '{}'; a batch runs {}", parsed.url, ENDPOINTS.join(" and ")));
        }
        Ok(parsed)
    }
}

/// The check of an input fed chunk by chunk: every line a request, custom ids unique, no line longer
/// than a request body may be, at most [`MAX_REQUESTS`].
#[derive(Debug)]
pub struct Checker {
    partial: Vec<u8>,
    line: usize,
    requests: usize,
    custom_ids: HashSet<String>,
    max_line_bytes: usize,
}

impl Checker {
    #[must_use]
    pub fn new(max_line_bytes: usize) -> Self {
        Self { partial: Vec::new(), line: 0, requests: 0, custom_ids: HashSet::new(), max_line_bytes }
    }

    /// Checks the lines `chunk` completes.
    ///
    /// # Errors
    /// What is wrong with the first bad line, naming it.
    pub fn feed(&mut self, mut chunk: &[u8]) -> Result<(), String> {
        while let Some(end) = chunk.iter().position(|b| *b == b'\n') {
            if self.partial.is_empty() {
                self.line(&chunk[..end])?;
            } else {
                self.partial.extend_from_slice(&chunk[..end]);
                let line = std::mem::take(&mut self.partial);
                self.line(&line)?;
            }
            chunk = &chunk[end + 1..];
        }
        if self.partial.len() + chunk.len() > self.max_line_bytes {
            return Err(self.too_long(self.line + 1));
        }
        self.partial.extend_from_slice(chunk);
        Ok(())
    }

    /// Checks the last line; the number of requests.
    ///
    /// # Errors
    /// A bad last line, or no request at all.
    pub fn finish(mut self) -> Result<usize, String> {
        let last = std::mem::take(&mut self.partial);
        self.line(&last)?;
        if self.requests == 0 {
            return Err("the file holds no request: a batch input has one JSON request per line".into());
        }
        Ok(self.requests)
    }

    fn too_long(&self, line: usize) -> String {
        format!("line {line} is longer than a request body may be ({} bytes)", self.max_line_bytes)
    }

    fn line(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.line += 1;
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        if bytes.len() > self.max_line_bytes {
            return Err(self.too_long(self.line));
        }
        let line = self.line;
        let parsed = InputLine::parse(bytes).map_err(|why| format!("line {line}: {why}"))?;
        if !self.custom_ids.insert(parsed.custom_id.clone()) {
            return Err(format!("line {line}: custom_id '{}' is used by an earlier line; each must be unique", parsed.custom_id));
        }
        self.requests += 1;
        if self.requests > MAX_REQUESTS {
            return Err(format!("line {line}: a batch holds at most {MAX_REQUESTS} requests"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str) -> String {
        format!(r#"{{"custom_id":"{id}","method":"POST","url":"/v1/chat/completions","body":{{"model":"m"}}}}"#)
    }

    fn check(text: &str, chunk: usize) -> Result<usize, String> {
        let mut checker = Checker::new(200);
        for piece in text.as_bytes().chunks(chunk) {
            checker.feed(piece)?;
        }
        checker.finish()
    }

    #[test]
    fn lines_split_anywhere_between_chunks_are_checked_whole() {
        let text = format!("{}\r\n{}\n\n{}", request("a"), request("b"), request("c"));
        for chunk in [1, 2, 7, 64, 10_000] {
            assert_eq!(check(&text, chunk), Ok(3), "chunks of {chunk}");
        }
        assert_eq!(check(&format!("{}\n", request("a")), 5), Ok(1));
    }

    #[test]
    fn a_bad_line_is_named() {
        let bad = [
            (format!("{}\nnot json", request("a")), "line 2: it is not a batch request"),
            (format!("{}\n{}", request("a"), request("a")), "line 2: custom_id 'a' is used by an earlier line"),
            (request("a").replace("POST", "GET"), "line 1: its method is 'GET'"),
            (request("a").replace("/v1/chat/completions", "/v1/embeddings"), "line 1: its url is '/v1/embeddings'"),
            (request("a").replace("\"body\"", "\"extra\":1,\"body\""), "line 1: it is not a batch request (unknown field `extra`"),
            (request(""), "line 1: its custom_id must be"),
            (format!("{}\n{}", request("a"), "x".repeat(300)), "line 2 is longer than a request body may be (200 bytes)"),
            ("\n\n".to_owned(), "the file holds no request"),
        ];
        for (text, want) in bad {
            for chunk in [3, 10_000] {
                let got = check(&text, chunk).unwrap_err();
                assert!(got.starts_with(want), "{got:?} for {text:?} in chunks of {chunk}");
            }
        }
    }
}
