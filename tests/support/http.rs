//! Throwaway HTTP servers on loopback: canned answers, recorded requests.

/// An HTTP server on 127.0.0.1 that answers each request with the next of
/// `responses` (`{port}` replaced by its port) and counts them.
pub fn serve_http(responses: Vec<String>) -> (u16, std::thread::JoinHandle<usize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut served = 0;
        while served < responses.len() && std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    stream.set_nonblocking(false).ok();
                    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok();
                    let mut buffer = [0u8; 4096];
                    let _ = std::io::Read::read(&mut stream, &mut buffer);
                    let response = responses[served].replace("{port}", &port.to_string());
                    let _ = std::io::Write::write_all(&mut stream, response.as_bytes());
                    served += 1;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        served
    });
    (port, handle)
}

/// Like [`serve_http`], and the server's thread returns the requests it
/// received (their head: request line and headers, as text).
pub fn serve_http_recording(responses: Vec<String>) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    serve_http_recording_for(responses, std::time::Duration::from_secs(20))
}

/// Like [`serve_http_recording`], serving for at most `time`.
pub fn serve_http_recording_for(
    responses: Vec<String>,
    time: std::time::Duration,
) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + time;
        let mut requests = Vec::new();
        while requests.len() < responses.len() && std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    stream.set_nonblocking(false).ok();
                    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok();
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match std::io::Read::read(&mut stream, &mut buffer) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let response = responses[requests.len()].replace("{port}", &port.to_string());
                    let _ = std::io::Write::write_all(&mut stream, response.as_bytes());
                    requests.push(String::from_utf8_lossy(&head).into_owned());
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        requests
    });
    (port, handle)
}

/// A loopback HTTP server that answers every request `200 {}` (kept-alive
/// connections too) and sends each request's body on the channel: a
/// receiver of OTLP exports, say. Returns its port.
pub fn http_sink() -> (u16, std::sync::mpsc::Receiver<Vec<u8>>) {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let (sender, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let sender = sender.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut stream = stream;
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let _ = sender.send(body);
                    let ok = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                    if stream.write_all(ok.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, received)
}
