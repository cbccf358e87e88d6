//! dcgm-exporter as the tests see it: text written from dcgm-exporter's
//! documented format (its default counters, HELP/TYPE lines, the label set
//! gpu, UUID, pci_bus_id, device, modelName, Hostname, the driver version,
//! and GPU_I_PROFILE/GPU_I_ID on a MIG GPU's series), and a small HTTP
//! server on loopback that answers /metrics with it, or misbehaves on purpose.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One GPU of a simulated dcgm-exporter node.
#[derive(Debug, Clone)]
pub struct DcgmGpu {
    pub index: u32,
    pub model: &'static str,
    pub util: u32,
    pub temp: u32,
    /// `None`: DCGM cannot read it; the exporter writes the blank sentinel.
    pub mem_temp: Option<u32>,
    pub power_w: f64,
    pub fb_used_mib: u64,
    pub fb_free_mib: u64,
    /// MIG instances: (GPU instance id, profile, FB used MiB, FB free MiB).
    pub mig: Vec<(u32, &'static str, u64, u64)>,
}

impl DcgmGpu {
    pub fn new(index: u32, model: &'static str, util: u32) -> Self {
        DcgmGpu {
            index,
            model,
            util,
            temp: 40 + index,
            mem_temp: Some(50 + index),
            power_w: 100.5 + f64::from(index),
            fb_used_mib: 1000 * u64::from(index + 1),
            fb_free_mib: 80_000,
            mig: Vec::new(),
        }
    }

    pub fn uuid(&self) -> String {
        format!("GPU-0000{:04x}-d9cf-fef3-62e9-d92044ab6e52", self.index)
    }
}

/// Two GPU models on one node; GPU 1 in MIG mode with two instances; GPU 0's
/// memory temperature unsupported (the blank sentinel).
pub fn mixed_node() -> Vec<DcgmGpu> {
    let mut g0 = DcgmGpu::new(0, "NVIDIA H100 80GB HBM3", 87);
    g0.mem_temp = None;
    let mut g1 = DcgmGpu::new(1, "NVIDIA A100-SXM4-80GB", 0);
    g1.mig = vec![(1, "3g.40gb", 2048, 38000), (2, "1g.10gb", 512, 9000)];
    vec![g0, g1]
}

/// DCGM's "not supported" for an int64 field (DCGM_INT64_NOT_SUPPORTED).
pub const DCGM_INT64_NOT_SUPPORTED: &str = "9223372036854775794";

/// dcgm-exporter's text for one node.
pub fn dcgm_text(hostname: &str, gpus: &[DcgmGpu]) -> String {
    type Get = fn(&DcgmGpu) -> String;
    let families: [(&str, &str, &str, Get); 8] = [
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", |_| {
            "1980".into()
        }),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", |g| {
            g.temp.to_string()
        }),
        ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", |g| {
            g.mem_temp.map_or(DCGM_INT64_NOT_SUPPORTED.into(), |t| t.to_string())
        }),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", |g| {
            g.power_w.to_string()
        }),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            |g| (1_000_000u64 * u64::from(g.index + 1)).to_string(),
        ),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", |g| {
            g.util.to_string()
        }),
        (
            "DCGM_FI_DEV_XID_ERRORS",
            "gauge",
            "Value of the last XID error encountered.",
            |_| "0".into(),
        ),
        (
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            "counter",
            "Total number of PCIe retries.",
            |_| "0".into(),
        ),
    ];
    let mut out = String::new();
    for (name, ty, help, get) in families {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {ty}\n"));
        for g in gpus {
            // dcgm-exporter writes a MIG GPU's fields once per instance.
            if g.mig.is_empty() {
                out.push_str(&format!("{name}{{{}}} {}\n", labels(hostname, g, None), get(g)));
            }
            for m in &g.mig {
                out.push_str(&format!("{name}{{{}}} {}\n", labels(hostname, g, Some(m)), get(g)));
            }
        }
    }
    for (name, help, pick) in [
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", 1),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", 0),
    ] {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        for g in gpus {
            if g.mig.is_empty() {
                let v = if pick == 0 { g.fb_used_mib } else { g.fb_free_mib };
                out.push_str(&format!("{name}{{{}}} {v}\n", labels(hostname, g, None)));
            }
            for m in &g.mig {
                let v = if pick == 0 { m.2 } else { m.3 };
                out.push_str(&format!("{name}{{{}}} {v}\n", labels(hostname, g, Some(m))));
            }
        }
    }
    out
}

fn labels(hostname: &str, g: &DcgmGpu, mig: Option<&(u32, &'static str, u64, u64)>) -> String {
    let mut l = format!(
        "gpu=\"{i}\",UUID=\"{u}\",pci_bus_id=\"00000000:{b:02X}:00.0\",device=\"nvidia{i}\",modelName=\"{m}\",Hostname=\"{hostname}\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"",
        i = g.index,
        u = g.uuid(),
        b = 0x07 + g.index,
        m = g.model,
    );
    if let Some((gi, prof, _, _)) = mig {
        l.push_str(&format!(",GPU_I_PROFILE=\"{prof}\",GPU_I_ID=\"{gi}\""));
    }
    l.push_str(",container=\"\",namespace=\"\",pod=\"\"");
    l
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this text as dcgm-exporter's content type.
    Metrics(String),
    /// Raw bytes written as they are (status line, headers, body).
    Raw(Vec<u8>),
    /// Reads the request, then never answers (until the process ends).
    Hang,
    /// Headers, then a byte of body every 100 ms, for ever.
    Trickle,
    /// Headers, then metrics lines without end, as fast as they are read.
    Endless,
}

impl Reply {
    pub fn html() -> Reply {
        let body = "<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>\n";
        Reply::Raw(response("200 OK", "text/html; charset=utf-8", body.as_bytes()))
    }

    pub fn status_500() -> Reply {
        Reply::Raw(response(
            "500 Internal Server Error",
            "text/plain",
            b"collector failed\n",
        ))
    }

    /// The text cut in the middle of a line (and its length said honestly).
    pub fn truncated(text: &str) -> Reply {
        let cut = &text.as_bytes()[..text.len() * 2 / 3];
        let cut = match cut.iter().rposition(|&b| b == b'\n') {
            Some(i) => &cut[..i + 12],
            None => cut,
        };
        Reply::Raw(response("200 OK", "text/plain; version=0.0.4; charset=utf-8", cut))
    }
}

pub fn response(status: &str, ctype: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// An HTTP server on a loopback port; the reply can be changed while it runs.
/// Its threads end with the test process.
pub struct HttpServer {
    pub port: u16,
    reply: Arc<Mutex<Reply>>,
}

impl HttpServer {
    pub fn start(reply: Reply) -> HttpServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let reply = Arc::new(Mutex::new(reply));
        let r = reply.clone();
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                let r = r.clone();
                std::thread::spawn(move || serve(conn, &r));
            }
        });
        HttpServer { port, reply }
    }

    pub fn set(&self, reply: Reply) {
        *self.reply.lock().expect("lock") = reply;
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

fn serve(mut conn: TcpStream, reply: &Mutex<Reply>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let reply = reply.lock().expect("lock").clone();
    let bytes = match reply {
        Reply::Metrics(text) => response("200 OK", "text/plain; version=0.0.4; charset=utf-8", text.as_bytes()),
        Reply::Raw(b) => b,
        Reply::Hang => {
            std::thread::sleep(Duration::from_secs(3600));
            return;
        }
        Reply::Trickle => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n");
            for b in dcgm_text("gpu-slow", &mixed_node()).bytes().cycle() {
                std::thread::sleep(Duration::from_millis(100));
                if conn.write_all(&[b]).is_err() {
                    return;
                }
            }
            return;
        }
        Reply::Endless => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n");
            let line = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-0\",Hostname=\"gpu-huge\"} 1\n".repeat(1000);
            while conn.write_all(line.as_bytes()).is_ok() {}
            return;
        }
    };
    let _ = conn.write_all(&bytes);
    let _ = conn.flush();
}
