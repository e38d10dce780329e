//! The OpenAI-compatible adapter against a fake server on the loopback interface.
#![cfg(feature = "openai")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use soulmem::read::openai::{OpenAiConfig, OpenAiEmbedder, OpenAiEngine};
use soulmem::{CognitiveEngine, Embedder, Memory, RecallQuery, Remember, Settings};

/// Serves `replies.len()` requests on 127.0.0.1, one canned `(status, body)` each;
/// the join handle yields the raw requests.
fn serve(replies: Vec<(u16, String)>) -> (String, JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for (status, body) in replies {
            let (stream, _) = listener.accept().expect("accept");
            stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut head = String::new();
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).expect("read") == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().expect("length");
                }
                head.push_str(&line);
            }
            let mut buf = vec![0u8; len];
            reader.read_exact(&mut buf).expect("body");
            seen.push(format!("{head}\n{}", String::from_utf8_lossy(&buf)));
            let mut out = stream;
            let reason = if status == 200 { "OK" } else { "Internal Server Error" };
            write!(
                out,
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .expect("reply");
        }
        seen
    });
    (base, handle)
}

#[test]
fn chat_completions_round_trip_and_errors() {
    let ok = r#"{"choices":[{"message":{"role":"assistant","content":"2, 1"}}]}"#.to_owned();
    let (base, server) = serve(vec![(200, ok), (500, r#"{"error":"boom"}"#.into())]);
    // SAFETY: this test binary sets the variable once before any thread reads it.
    unsafe { std::env::set_var("SOULMEM_TEST_OPENAI_KEY", "sk-test") };
    let cfg = OpenAiConfig::new(base, "tiny-model")
        .api_key_from_env("SOULMEM_TEST_OPENAI_KEY")
        .expect("key")
        .timeout(Duration::from_secs(5));
    let engine = OpenAiEngine::new(cfg);
    assert_eq!(engine.think("pick two").expect("reply"), "2, 1");
    assert!(engine.think("again").is_err(), "a 500 is an error");
    let seen = server.join().expect("server");
    let first = &seen[0];
    assert!(first.starts_with("POST /v1/chat/completions"), "{first}");
    assert!(first.to_ascii_lowercase().contains("authorization: bearer sk-test"));
    assert!(first.contains(r#""model":"tiny-model""#) && first.contains("pick two"));
    assert!(
        OpenAiConfig::new("http://127.0.0.1:1", "m")
            .api_key_from_env("SOULMEM_UNSET_VAR_X")
            .is_err()
    );
}

#[test]
fn smart_recall_through_the_adapter() {
    let reply = r#"{"choices":[{"message":{"content":"Selected: 3, 2"}}]}"#.to_owned();
    let (base, server) = serve(vec![(200, reply)]);
    let engine = OpenAiEngine::new(OpenAiConfig::new(base, "m").timeout(Duration::from_secs(5)));
    let mut s = Settings::for_profile(soulmem::Profile::Default);
    s.smart_recall_enabled = true;
    let mem = Memory::builder()
        .settings(s)
        .cognitive_engine(Arc::new(engine))
        .open_in_memory()
        .expect("open");
    for i in 0..6 {
        mem.remember(&Remember::new("semantic", format!("tea fact {i}"))).expect("r");
    }
    let mut q = RecallQuery::new("tea fact");
    q.limit = 2;
    let r = mem.recall(&q).expect("recall");
    assert_eq!(r.memories.len(), 2);
    assert!(r.trace.rerank.iter().any(|l| l == "selected: 3, 2"), "{:?}", r.trace.rerank);
    server.join().expect("server");
}

#[test]
fn embeddings_endpoint() {
    let reply = r#"{"data":[{"embedding":[0.6,0.8,0.0]}]}"#.to_owned();
    let (base, server) = serve(vec![(200, reply)]);
    let e = OpenAiEmbedder::new(OpenAiConfig::new(base, "emb"), 3);
    let v = e.embed("hello").expect("embed").expect("vector");
    assert_eq!(v.len(), 3);
    let seen = server.join().expect("server");
    assert!(seen[0].starts_with("POST /v1/embeddings"));
}

#[test]
fn timeouts_are_errors() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let hold = std::thread::spawn(move || {
        let (s, _) = listener.accept().expect("accept");
        std::thread::sleep(Duration::from_millis(1500));
        drop(s);
    });
    let engine =
        OpenAiEngine::new(OpenAiConfig::new(base, "m").timeout(Duration::from_millis(300)));
    assert!(engine.think("hi").is_err());
    hold.join().expect("holder");
}
