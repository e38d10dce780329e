//! Adapters for OpenAI-compatible HTTP APIs (feature `openai`): a
//! [`CognitiveEngine`] on `POST {base}/chat/completions` and an [`Embedder`] on
//! `POST {base}/embeddings`.
//!
//! `base` is the API root including its version, e.g. `https://api.openai.com/v1` or
//! a local server's `http://127.0.0.1:8080/v1`. The API key is read once, at
//! construction, from the environment variable you name (never passed around as a
//! literal). Every request has a timeout.

use std::time::Duration;

use serde_json::{Value, json};

use super::smart::CognitiveEngine;
use super::vector::Embedder;
use crate::error::{Error, Result};

/// Default request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Connection settings shared by both adapters.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// API root including the version (`…/v1`), without a trailing slash.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Bearer token, if the server wants one.
    api_key: Option<String>,
    /// Timeout of a whole request.
    pub timeout: Duration,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl OpenAiConfig {
    /// Settings for `model` at `base_url`, without a key, with [`DEFAULT_TIMEOUT`].
    #[must_use]
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let mut base_url: String = base_url.into();
        while base_url.ends_with('/') {
            base_url.pop();
        }
        Self { base_url, model: model.into(), api_key: None, timeout: DEFAULT_TIMEOUT }
    }

    /// Reads the API key from the environment variable `var`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the variable is unset or not Unicode.
    pub fn api_key_from_env(mut self, var: &str) -> Result<Self> {
        let key = std::env::var(var).map_err(|e| {
            Error::InvalidInput(format!("API key variable {var} cannot be read: {e}"))
        })?;
        self.api_key = Some(key);
        Ok(self)
    }

    /// Sets the request timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let url = format!("{}/{path}", self.base_url);
        let mut req = agent.post(&url).header("Content-Type", "application/json");
        if let Some(k) = &self.api_key {
            req = req.header("Authorization", &format!("Bearer {k}"));
        }
        let mut resp =
            req.send(body.to_string()).map_err(|e| Error::Engine(format!("POST {url}: {e}")))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| Error::Engine(format!("reading the reply of {url}: {e}")))?;
        if !status.is_success() {
            let shown: String = text.chars().take(300).collect();
            return Err(Error::Engine(format!("{url} answered {status}: {shown}")));
        }
        serde_json::from_str(&text)
            .map_err(|e| Error::Engine(format!("{url} answered with invalid JSON: {e}")))
    }
}

/// A [`CognitiveEngine`] on an OpenAI-compatible chat-completions endpoint: one user
/// message, temperature 0, the first choice's text.
#[derive(Debug, Clone)]
pub struct OpenAiEngine {
    config: OpenAiConfig,
}

impl OpenAiEngine {
    /// An engine with these settings.
    #[must_use]
    pub fn new(config: OpenAiConfig) -> Self {
        Self { config }
    }
}

impl CognitiveEngine for OpenAiEngine {
    fn think(&self, prompt: &str) -> Result<String> {
        let body = json!({
            "model": self.config.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
        });
        let reply = self.config.post("chat/completions", &body)?;
        reply
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                Error::Engine("chat completion without choices[0].message.content".into())
            })
    }
}

/// An [`Embedder`] on an OpenAI-compatible embeddings endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    dim: usize,
}

impl OpenAiEmbedder {
    /// An embedder whose model returns `dim`-float vectors.
    #[must_use]
    pub fn new(config: OpenAiConfig, dim: usize) -> Self {
        Self { config, dim }
    }
}

impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.config.model
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, text: &str) -> Result<Option<Vec<f32>>> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        let body = json!({"model": self.config.model, "input": text});
        let reply = self.config.post("embeddings", &body)?;
        let v = reply
            .pointer("/data/0/embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::Engine("embedding reply without data[0].embedding".into()))?;
        let v: Vec<f32> = v.iter().filter_map(Value::as_f64).map(|x| x as f32).collect();
        if v.len() != self.dim {
            return Err(Error::Engine(format!(
                "model {} returned {} floats, expected {}",
                self.config.model,
                v.len(),
                self.dim
            )));
        }
        Ok(Some(v))
    }
}
