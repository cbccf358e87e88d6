//! What SignalProcess will and will not signal. The agent runs as root, so
//! a pid is signalled only when all of these hold: it names one process
//! (not 0, which kill(2) takes for the caller's whole process group), not
//! init, not the agent, nothing in the agent's process group; the latest
//! sample shows it on a GPU; and that GPU's process list, asked of the
//! driver at the moment of the signal, still has it. The process is held
//! by a pidfd from before that last check to the signal, so a process that
//! exits meanwhile and whose pid is reused is not the one signalled.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::sources::GpuProcesses;

/// How long the driver may take to list a GPU's processes for a signal.
pub const LIST_WAIT: Duration = Duration::from_secs(5);

/// `pid` as kill(2) takes it, or why it is never signalled, whatever a
/// process list says.
pub fn allowed(pid: u32) -> Result<libc::pid_t, String> {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return Err(format!("pid {pid} is out of range: refused"));
    };
    match p {
        0 => Err("pid 0 is not a process (kill would signal the agent's whole process group): refused".into()),
        1 => Err("pid 1 is init: refused".into()),
        p if p == std::process::id() as libc::pid_t => Err(format!("pid {pid} is the agent itself: refused")),
        p => Ok(p),
    }
}

/// Refuses a process in the agent's own process group (its helpers, the
/// shell that started it): signalling it would reach the agent's own.
pub fn outside_own_group(pid: libc::pid_t) -> Result<(), String> {
    // SAFETY: getpgid and getpgrp only read the process table.
    let (theirs, ours) = unsafe { (libc::getpgid(pid), libc::getpgrp()) };
    if theirs < 0 {
        return Err(format!("pid {pid}: {}: not signalled", io::Error::last_os_error()));
    }
    if theirs == ours {
        return Err(format!("pid {pid} is in the agent's process group: refused"));
    }
    Ok(())
}

/// Whether GPU `gpu` lists `pid` now, asked of the driver (on the blocking
/// pool, for at most `LIST_WAIT`: a hung GPU refuses the signal, it does not
/// hang the request).
pub async fn still_on_gpu(procs: Option<Arc<dyn GpuProcesses>>, gpu: u32, pid: u32) -> Result<(), String> {
    let Some(procs) = procs else {
        return Err(format!(
            "cannot ask GPU {gpu} for its processes now, to confirm pid {pid} is still there: not signalled"
        ));
    };
    let asked = tokio::time::timeout(LIST_WAIT, tokio::task::spawn_blocking(move || procs.pids(gpu)))
        .await
        .map_err(|_| format!("no answer within {} s", LIST_WAIT.as_secs()))
        .and_then(|joined| joined.map_err(|e| e.to_string()))
        .and_then(|listed| listed);
    match asked {
        Ok(pids) if pids.contains(&pid) => Ok(()),
        Ok(_) => Err(format!(
            "pid {pid} is no longer on GPU {gpu} (its process list now): not signalled"
        )),
        Err(e) => Err(format!(
            "cannot confirm that pid {pid} is still on GPU {gpu} ({e}): not signalled"
        )),
    }
}

/// One process, held from the checks to the signal: a pidfd where the
/// kernel has them (Linux 5.3), so that the signal reaches the process
/// checked or none; the bare pid otherwise.
pub struct Target {
    pid: libc::pid_t,
    fd: Option<std::os::fd::OwnedFd>,
}

impl Target {
    /// Holds `pid`; an error if there is no such process.
    pub fn hold(pid: libc::pid_t) -> io::Result<Target> {
        Ok(Target {
            pid,
            fd: pidfd_open(pid)?,
        })
    }

    /// Sends `signal` to the process held (an error if it has exited since).
    pub fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd {
            use std::os::fd::AsRawFd;
            // SAFETY: a pidfd this value owns, a fixed signal, no siginfo.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    signal,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            return if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            };
        }
        // SAFETY: kill(2) with a pid that passed `allowed` and a fixed signal.
        if unsafe { libc::kill(self.pid, signal) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(target_os = "linux")]
fn pidfd_open(pid: libc::pid_t) -> io::Result<Option<std::os::fd::OwnedFd>> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open(2) with no flags; the descriptor it returns is owned here.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd >= 0 {
        // SAFETY: a new descriptor nothing else owns.
        return Ok(Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // A kernel without pidfds: the pid alone, checked for existence.
        Some(libc::ENOSYS) => exists(pid).map(|()| None),
        _ => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
fn pidfd_open(pid: libc::pid_t) -> io::Result<Option<std::os::fd::OwnedFd>> {
    exists(pid).map(|()| None)
}

fn exists(pid: libc::pid_t) -> io::Result<()> {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Listed(Result<Vec<u32>, String>);

    impl GpuProcesses for Listed {
        fn pids(&self, _index: u32) -> Result<Vec<u32>, String> {
            self.0.clone()
        }
    }

    #[test]
    fn pid_0_init_the_agent_and_out_of_range_pids_are_refused() {
        for (pid, why) in [
            (0, "process group"),
            (1, "init"),
            (std::process::id(), "the agent itself"),
            (u32::MAX, "out of range"),
            (1 << 31, "out of range"),
        ] {
            let e = allowed(pid).expect_err("refused");
            assert!(e.contains(&format!("pid {pid} ")) && e.contains(why), "{pid}: {e}");
        }
        assert_eq!(allowed(4242), Ok(4242));
    }

    #[test]
    fn processes_of_the_agents_own_group_are_refused() {
        // A child in this process group, and one in a group of its own.
        use std::os::unix::process::CommandExt as _;
        let mut same = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let mut own = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep");
        let e = outside_own_group(same.id() as libc::pid_t).expect_err("same group");
        assert!(e.contains("the agent's process group"), "{e}");
        assert_eq!(outside_own_group(own.id() as libc::pid_t), Ok(()));
        for c in [&mut same, &mut own] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    #[tokio::test]
    async fn a_pid_is_signalled_only_while_the_gpu_lists_it_now() {
        let listed = |r: Result<Vec<u32>, String>| Some(Arc::new(Listed(r)) as Arc<dyn GpuProcesses>);
        assert_eq!(still_on_gpu(listed(Ok(vec![7, 4242])), 3, 4242).await, Ok(()));
        // Exited since the sample: no longer listed.
        let e = still_on_gpu(listed(Ok(vec![7])), 3, 4242).await.expect_err("gone");
        assert!(e.contains("pid 4242 is no longer on GPU 3"), "{e}");
        // The GPU cannot say: not signalled either.
        let e = still_on_gpu(listed(Err("gpu_lost".into())), 3, 4242)
            .await
            .expect_err("unknown");
        assert!(e.contains("cannot confirm") && e.contains("gpu_lost"), "{e}");
        let e = still_on_gpu(None, 3, 4242).await.expect_err("no list");
        assert!(e.contains("not signalled"), "{e}");
    }

    #[test]
    fn a_held_process_that_ended_is_not_signalled() {
        let mut c = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let t = Target::hold(c.id() as libc::pid_t).expect("held");
        let _ = c.kill();
        let _ = c.wait();
        // Reaped: the held process is gone, whatever now has its pid.
        assert!(t.signal(libc::SIGTERM).is_err());
    }
}
