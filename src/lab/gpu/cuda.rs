//! The CUDA driver API, loaded at run time from `libcuda.so.1`, as a [`Backend`].
//!
//! Why loaded at run time: latscope must build, run and be tested on machines with no NVIDIA
//! driver and no CUDA toolkit (CI, this project's development machines); linking `libcuda` would
//! make the whole binary fail to start there. Only `lab gpu` opens it, and a machine without it
//! gets an error naming the library (exit 1), not a loader failure.
//!
//! Why a binding of our own and not `cudarc`: the lab needs about twenty functions; `cudarc`
//! up to 0.19.4 resolved every symbol of its level on first use and panicked on a missing one
//! (its issues #422, #464, #474), its pinned allocations are always write-combined (slow for
//! the host to read a flag from), and its safe launch adds a `cuCtxGetCurrent` and event
//! tracking to every launch: cost inside the very call this lab times. Here each function is
//! resolved by name with `dlsym` when the library is opened (a missing one is named in the
//! error), with `libc`'s `dlopen`/`dlsym`, a dependency latscope already has, rather than
//! `libloading`. Versioned names (`cuCtxCreate_v2`, ...) are the ones the CUDA headers map to.
//! The library is never closed: unloading the CUDA driver while a context may exist is not
//! supported by it, and the process ends soon after the lab.
//!
//! The kernels need a driver of CUDA 11.0 or newer ([`ptx::MIN_DRIVER`], checked with
//! `cuDriverGetVersion`); `cuGraphInstantiateWithFlags` (for `graph:G`) appeared in 11.4, and a
//! driver without it is refused at load, naming it.
//!
//! Every `CUresult` other than success becomes [`GpuError::Cuda`] naming the call and the
//! driver's error name (`cuGetErrorName`). `LATSCOPE_LIBCUDA` names another library to open
//! (for tests: a library without the functions, or none).

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::ops::Range;

use super::clock::Ping;
use super::{Backend, DeviceInfo, DeviceStamps, GpuError, Launch, Setup, SyncMode, ptx};

/// The driver library the lab opens.
pub const LIBRARY: &str = "libcuda.so.1";

type CuResult = c_int;
type CuDevice = c_int;
type Handle = *mut c_void;
type DevicePtr = u64;

const SUCCESS: CuResult = 0;
/// `CUDA_ERROR_NO_DEVICE`
const ERROR_NO_DEVICE: CuResult = 100;
/// `CUDA_ERROR_DEVICE_UNAVAILABLE`: an exclusive-process device another process holds
const ERROR_DEVICE_UNAVAILABLE: CuResult = 46;
/// `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`
const ERROR_UNSUPPORTED_PTX_VERSION: CuResult = 222;
/// `CUDA_ERROR_INVALID_PTX`
const ERROR_INVALID_PTX: CuResult = 218;

const ATTRIBUTE_COMPUTE_MODE: c_int = 20;
const CTX_SCHED_SPIN: c_uint = 0x1;
const CTX_SCHED_YIELD: c_uint = 0x2;
const CTX_SCHED_BLOCKING_SYNC: c_uint = 0x4;
const CTX_MAP_HOST: c_uint = 0x8;
const STREAM_NON_BLOCKING: c_uint = 0x1;
const MEMHOSTALLOC_PORTABLE: c_uint = 0x1;
const MEMHOSTALLOC_DEVICEMAP: c_uint = 0x2;
const JIT_ERROR_LOG_BUFFER: c_int = 5;
const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;
const STREAM_CAPTURE_MODE_RELAXED: c_int = 2;

/// The functions the lab calls, resolved by name when the library is opened.
macro_rules! api {
    ($($name:ident: fn($($arg:ty),*);)*) => {
        #[allow(non_snake_case)]
        struct Api {
            $($name: unsafe extern "C" fn($($arg),*) -> CuResult,)*
        }

        impl Api {
            fn load(library: &str) -> Result<Api, GpuError> {
                let handle = open(library)?;
                Ok(Api {
                    $($name: {
                        let p = symbol(handle, library, stringify!($name))?;
                        // SAFETY: the symbol is the driver API function of that name, whose
                        // C signature (cuda.h) is the one declared here.
                        unsafe {
                            std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> CuResult>(p)
                        }
                    },)*
                })
            }
        }
    };
}

api! {
    cuInit: fn(c_uint);
    cuDriverGetVersion: fn(*mut c_int);
    cuDeviceGetCount: fn(*mut c_int);
    cuDeviceGet: fn(*mut CuDevice, c_int);
    cuDeviceGetAttribute: fn(*mut c_int, c_int, CuDevice);
    cuDeviceGetName: fn(*mut c_char, c_int, CuDevice);
    cuCtxCreate_v2: fn(*mut Handle, c_uint, CuDevice);
    cuCtxDestroy_v2: fn(Handle);
    cuModuleLoadDataEx: fn(*mut Handle, *const c_void, c_uint, *mut c_int, *mut *mut c_void);
    cuModuleGetFunction: fn(*mut Handle, Handle, *const c_char);
    cuLaunchKernel: fn(Handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Handle, *mut *mut c_void, *mut *mut c_void);
    cuStreamCreate: fn(*mut Handle, c_uint);
    cuStreamSynchronize: fn(Handle);
    cuStreamDestroy_v2: fn(Handle);
    cuMemHostAlloc: fn(*mut *mut c_void, usize, c_uint);
    cuMemHostGetDevicePointer_v2: fn(*mut DevicePtr, *mut c_void, c_uint);
    cuMemFreeHost: fn(*mut c_void);
    cuStreamBeginCapture_v2: fn(Handle, c_int);
    cuStreamEndCapture: fn(Handle, *mut Handle);
    cuGraphInstantiateWithFlags: fn(*mut Handle, Handle, u64);
    cuGraphLaunch: fn(Handle, Handle);
    cuGraphExecDestroy: fn(Handle);
    cuGraphDestroy: fn(Handle);
    cuGetErrorName: fn(CuResult, *mut *const c_char);
    cuGetErrorString: fn(CuResult, *mut *const c_char);
}

/// The last `dlerror()` message.
fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl call on
    // this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown reason".to_string()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn open(library: &str) -> Result<*mut c_void, GpuError> {
    let err = |reason: String| GpuError::Library {
        library: library.to_string(),
        reason,
    };
    let name = CString::new(library).map_err(|_| err("a NUL in the name".to_string()))?;
    // SAFETY: dlopen with a NUL-terminated name; the handle is checked for null.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(err(dl_error()));
    }
    Ok(handle)
}

fn symbol(handle: *mut c_void, library: &str, name: &'static str) -> Result<*mut c_void, GpuError> {
    let c = CString::new(name).unwrap_or_default();
    // SAFETY: clears any earlier error, then looks up a NUL-terminated name in a handle dlopen
    // returned; a null result is an error (no driver function is at address 0).
    let p = unsafe {
        libc::dlerror();
        libc::dlsym(handle, c.as_ptr())
    };
    if p.is_null() {
        return Err(GpuError::Symbol {
            library: library.to_string(),
            symbol: name,
            reason: dl_error(),
        });
    }
    Ok(p)
}

/// Which error a failed `cuInit`/device query is: no device, or a driver error.
pub fn no_device_or(call: &'static str, code: i32, name: String, description: String) -> GpuError {
    if code == ERROR_NO_DEVICE {
        return GpuError::NoDevice(format!("{call}: {name} ({description})"));
    }
    GpuError::Cuda {
        call,
        code,
        name,
        description,
    }
}

/// Refuses a driver older than the PTX needs.
pub fn check_driver(version: i32) -> Result<(), GpuError> {
    if version < ptx::MIN_DRIVER {
        return Err(GpuError::DriverTooOld {
            have: version_text(version),
            need: version_text(ptx::MIN_DRIVER),
            isa: ptx::ISA,
        });
    }
    Ok(())
}

/// `12040` → `12.4 (12040)`.
pub fn version_text(v: i32) -> String {
    format!("{}.{} ({v})", v / 1000, (v % 1000) / 10)
}

/// Refuses a device this process may not use (compute mode `mode`, `CU_COMPUTEMODE_*`); an
/// exclusive-process device is tried, and [`held_elsewhere`] names it when it is taken.
pub fn check_compute_mode(index: i32, device: &str, mode: i32) -> Result<(), GpuError> {
    if mode == 2 {
        return Err(GpuError::ComputeMode {
            index,
            device: device.to_string(),
            mode: "prohibited",
            what: "no process may create a context on it (nvidia-smi -c DEFAULT allows it)"
                .to_string(),
        });
    }
    Ok(())
}

/// The error of a context that could not be created on an exclusive-process device.
pub fn held_elsewhere(index: i32, device: &str, mode: i32, code: i32) -> Option<GpuError> {
    (mode == 3 && code == ERROR_DEVICE_UNAVAILABLE).then(|| GpuError::ComputeMode {
        index,
        device: device.to_string(),
        mode: "exclusive-process",
        what: "another process holds it (nvidia-smi shows which); run the lab when it is free"
            .to_string(),
    })
}

/// Host-mapped memory: what the host reads and writes, and the device's address of it.
struct Mapped {
    host: *mut u8,
    device: DevicePtr,
    bytes: usize,
}

/// The CUDA backend: one device, one context (its schedule flag the run's [`SyncMode`]).
pub struct Cuda {
    api: Api,
    info: DeviceInfo,
    device: CuDevice,
    index: i32,
    mode: i32,
    ctx: Option<(Handle, SyncMode)>,
    stamp: Handle,
    ping: Handle,
    streams: Vec<Handle>,
    ping_stream: Handle,
    records: Option<Mapped>,
    cell: Option<Mapped>,
    record_bytes: usize,
    blocks: u32,
    spin_ns: u64,
    graphs: HashMap<usize, (Handle, Handle)>,
}

impl Cuda {
    /// Opens `library` (`LATSCOPE_LIBCUDA`, else [`LIBRARY`]), initializes the driver and picks
    /// device `index`.
    pub fn open(index: i32) -> Result<Cuda, GpuError> {
        let library = std::env::var("LATSCOPE_LIBCUDA").unwrap_or_else(|_| LIBRARY.to_string());
        let api = Api::load(&library)?;
        let mut cuda = Cuda {
            api,
            info: DeviceInfo {
                backend: "cuda".to_string(),
                driver: String::new(),
                device: String::new(),
            },
            device: 0,
            index,
            mode: 0,
            ctx: None,
            stamp: std::ptr::null_mut(),
            ping: std::ptr::null_mut(),
            streams: Vec::new(),
            ping_stream: std::ptr::null_mut(),
            records: None,
            cell: None,
            record_bytes: 0,
            blocks: 1,
            spin_ns: 0,
            graphs: HashMap::new(),
        };
        cuda.init()?;
        Ok(cuda)
    }

    /// `CUresult` → `Result`, naming the call.
    fn check(&self, call: &'static str, code: CuResult) -> Result<(), GpuError> {
        if code == SUCCESS {
            return Ok(());
        }
        let text = |f: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult| {
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: the driver writes a pointer to a static NUL-terminated string, or
            // fails and leaves it null.
            if unsafe { f(code, &mut p) } != SUCCESS || p.is_null() {
                return format!("CUresult {code}");
            }
            // SAFETY: non-null, static and NUL-terminated (above).
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        let (name, description) = (
            text(self.api.cuGetErrorName),
            text(self.api.cuGetErrorString),
        );
        Err(no_device_or(call, code, name, description))
    }

    fn init(&mut self) -> Result<(), GpuError> {
        let (mut version, mut count, mut mode) = (0, 0, 0);
        // SAFETY: each call writes the out-parameter it is given.
        unsafe {
            self.check("cuInit", (self.api.cuInit)(0))?;
            self.check(
                "cuDriverGetVersion",
                (self.api.cuDriverGetVersion)(&mut version),
            )?;
        }
        check_driver(version)?;
        self.info.driver = version_text(version);
        // SAFETY: as above.
        unsafe { self.check("cuDeviceGetCount", (self.api.cuDeviceGetCount)(&mut count))? };
        if count <= self.index {
            return Err(GpuError::NoDevice(format!(
                "the driver sees {count} device(s); device {} was asked for",
                self.index
            )));
        }
        let mut name = [0 as c_char; 256];
        let mut device = 0;
        // SAFETY: out-parameters as above; the name buffer's length is passed.
        unsafe {
            self.check(
                "cuDeviceGet",
                (self.api.cuDeviceGet)(&mut device, self.index),
            )?;
            self.device = device;
            self.check(
                "cuDeviceGetName",
                (self.api.cuDeviceGetName)(name.as_mut_ptr(), name.len() as c_int, self.device),
            )?;
            self.check(
                "cuDeviceGetAttribute(COMPUTE_MODE)",
                (self.api.cuDeviceGetAttribute)(&mut mode, ATTRIBUTE_COMPUTE_MODE, self.device),
            )?;
        }
        // SAFETY: the driver wrote a NUL-terminated name into the zeroed buffer.
        self.info.device = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        self.mode = mode;
        check_compute_mode(self.index, &self.info.device, mode)
    }

    /// A context with `sync`'s schedule flag, the module and its two kernels.
    fn context(&mut self, sync: SyncMode) -> Result<(), GpuError> {
        if self.ctx.is_some_and(|(_, s)| s == sync) {
            return Ok(());
        }
        self.release();
        let sched = match sync {
            SyncMode::Spin => CTX_SCHED_SPIN,
            SyncMode::Yield => CTX_SCHED_YIELD,
            SyncMode::Blocking => CTX_SCHED_BLOCKING_SYNC,
        };
        let mut ctx = std::ptr::null_mut();
        // SAFETY: writes the new context into `ctx`.
        let code =
            unsafe { (self.api.cuCtxCreate_v2)(&mut ctx, sched | CTX_MAP_HOST, self.device) };
        if let Some(e) = held_elsewhere(self.index, &self.info.device, self.mode, code) {
            return Err(e);
        }
        self.check("cuCtxCreate_v2", code)?;
        self.ctx = Some((ctx, sync));
        self.load_module()?;
        let mut ping_stream = std::ptr::null_mut();
        // SAFETY: writes the new stream.
        let code = unsafe { (self.api.cuStreamCreate)(&mut ping_stream, STREAM_NON_BLOCKING) };
        self.check("cuStreamCreate", code)?;
        self.ping_stream = ping_stream;
        self.cell = Some(self.map(64)?);
        Ok(())
    }

    fn load_module(&mut self) -> Result<(), GpuError> {
        let text = CString::new(ptx::module()).unwrap_or_default();
        let mut log = vec![0u8; 8192];
        let mut options = [JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut values = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
        let mut module = std::ptr::null_mut();
        // SAFETY: the PTX is NUL-terminated; the option values are the log buffer and its
        // length (passed as a pointer-sized integer, as the driver API documents).
        let code = unsafe {
            (self.api.cuModuleLoadDataEx)(
                &mut module,
                text.as_ptr().cast(),
                options.len() as c_uint,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if code == ERROR_UNSUPPORTED_PTX_VERSION || code == ERROR_INVALID_PTX {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let name = self
                .check("cuModuleLoadDataEx", code)
                .err()
                .map(|e| e.to_string());
            return Err(GpuError::Jit {
                name: name.unwrap_or_default(),
                log: String::from_utf8_lossy(&log[..end]).trim().to_string(),
            });
        }
        self.check("cuModuleLoadDataEx", code)?;
        self.stamp = self.function(module, ptx::STAMP)?;
        self.ping = self.function(module, ptx::PING)?;
        Ok(())
    }

    fn function(&self, module: Handle, name: &str) -> Result<Handle, GpuError> {
        let c = CString::new(name).unwrap_or_default();
        let mut f = std::ptr::null_mut();
        // SAFETY: looks a NUL-terminated name up in a loaded module; writes the function.
        let code = unsafe { (self.api.cuModuleGetFunction)(&mut f, module, c.as_ptr()) };
        self.check("cuModuleGetFunction", code)?;
        Ok(f)
    }

    /// `bytes` of zeroed host memory the device can address.
    fn map(&self, bytes: usize) -> Result<Mapped, GpuError> {
        let mut host = std::ptr::null_mut();
        let mut device = 0;
        // SAFETY: allocates `bytes` of pinned memory, then asks for its device address.
        unsafe {
            let flags = MEMHOSTALLOC_DEVICEMAP | MEMHOSTALLOC_PORTABLE;
            self.check(
                "cuMemHostAlloc",
                (self.api.cuMemHostAlloc)(&mut host, bytes, flags),
            )?;
            std::ptr::write_bytes(host.cast::<u8>(), 0, bytes);
            let code = (self.api.cuMemHostGetDevicePointer_v2)(&mut device, host, 0);
            self.check("cuMemHostGetDevicePointer_v2", code)?;
        }
        Ok(Mapped {
            host: host.cast(),
            device,
            bytes,
        })
    }

    fn free(&self, m: Option<Mapped>) {
        if let Some(m) = m {
            // SAFETY: memory cuMemHostAlloc returned, freed once (taken out of its Option).
            unsafe { (self.api.cuMemFreeHost)(m.host.cast()) };
        }
    }

    /// Launches the stamping kernel for `slot` on `stream`.
    fn launch_one(&self, stream: Handle, slot: usize) -> Result<(), GpuError> {
        let records = self.records.as_ref().ok_or_else(not_prepared)?;
        let mut record = records.device + (slot * self.record_bytes) as u64;
        let mut spin = self.spin_ns;
        let mut params = [
            (&mut record as *mut u64).cast::<c_void>(),
            (&mut spin as *mut u64).cast::<c_void>(),
        ];
        // SAFETY: the kernel takes two u64 parameters, passed as pointers to them that live
        // until the call returns (the driver copies them).
        let code = unsafe {
            (self.api.cuLaunchKernel)(
                self.stamp,
                self.blocks,
                1,
                1,
                1,
                1,
                1,
                0,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        self.check("cuLaunchKernel", code)
    }

    /// One graph per chunk of `per` slots (the warm-up's and the measured requests' chunks
    /// apart, as the loop launches them), captured on the first stream.
    fn build_graphs(&mut self, setup: &Setup, per: usize) -> Result<(), GpuError> {
        let stream = self.streams[0];
        let starts = (0..setup.warmup)
            .step_by(per)
            .map(|s| s..(s + per).min(setup.warmup))
            .chain(
                (setup.warmup..setup.slots)
                    .step_by(per)
                    .map(|s| s..(s + per).min(setup.slots)),
            );
        for chunk in starts.collect::<Vec<Range<usize>>>() {
            // SAFETY: capture on a stream this backend created; the launches in between are
            // recorded, not run.
            let code =
                unsafe { (self.api.cuStreamBeginCapture_v2)(stream, STREAM_CAPTURE_MODE_RELAXED) };
            self.check("cuStreamBeginCapture_v2", code)?;
            for slot in chunk.clone() {
                self.launch_one(stream, slot)?;
            }
            let (mut graph, mut exec) = (std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: ends the capture begun above; instantiates the graph it wrote.
            unsafe {
                self.check(
                    "cuStreamEndCapture",
                    (self.api.cuStreamEndCapture)(stream, &mut graph),
                )?;
                let code = (self.api.cuGraphInstantiateWithFlags)(&mut exec, graph, 0);
                self.check("cuGraphInstantiateWithFlags", code)?;
            }
            self.graphs.insert(chunk.start, (graph, exec));
        }
        Ok(())
    }

    /// Destroys graphs, streams, records; the context last.
    fn release(&mut self) {
        for (_, (graph, exec)) in self.graphs.drain() {
            // SAFETY: handles this backend instantiated, destroyed once (drained).
            unsafe {
                (self.api.cuGraphExecDestroy)(exec);
                (self.api.cuGraphDestroy)(graph);
            }
        }
        for s in std::mem::take(&mut self.streams) {
            // SAFETY: a stream this backend created, destroyed once (taken).
            unsafe { (self.api.cuStreamDestroy_v2)(s) };
        }
        let records = self.records.take();
        self.free(records);
        if let Some((ctx, _)) = self.ctx.take() {
            let cell = self.cell.take();
            self.free(cell);
            // SAFETY: the ping stream and the context this backend created, destroyed once.
            unsafe {
                (self.api.cuStreamDestroy_v2)(self.ping_stream);
                (self.api.cuCtxDestroy_v2)(ctx);
            }
        }
    }

    /// The u32 at byte `offset` of `m`.
    fn read_u32(m: &Mapped, offset: usize) -> u32 {
        debug_assert!(offset + 4 <= m.bytes);
        // SAFETY: inside the mapping (callers index within it), 4-byte aligned; volatile because
        // the device writes it.
        unsafe { std::ptr::read_volatile(m.host.add(offset).cast::<u32>()) }
    }

    fn read_u64(m: &Mapped, offset: usize) -> u64 {
        debug_assert!(offset + 8 <= m.bytes);
        // SAFETY: as read_u32, 8-byte aligned.
        unsafe { std::ptr::read_volatile(m.host.add(offset).cast::<u64>()) }
    }

    fn ping_once(&self, cell: &Mapped, seq: u32) -> Result<Ping, GpuError> {
        let host_before = self.now();
        // SAFETY: the first u32 of the 64-byte cell; volatile: the device polls it.
        unsafe { std::ptr::write_volatile(cell.host.cast::<u32>(), seq) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        while Cuda::read_u32(cell, 4) != seq {
            if self.now() - host_before > 1_000_000_000 {
                return Err(GpuError::Timeout(
                    "clock calibration: the device did not answer a ping within 1 s".to_string(),
                ));
            }
            std::hint::spin_loop();
        }
        let host_after = self.now();
        // The device fenced its stamp before its answer; the host must not read the stamp
        // before the answer (weakly ordered hosts, such as aarch64).
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        Ok(Ping {
            host_before,
            device: Cuda::read_u64(cell, 8),
            host_after,
        })
    }
}

fn not_prepared() -> GpuError {
    GpuError::Unsupported("the CUDA backend was used before prepare".to_string())
}

impl Drop for Cuda {
    fn drop(&mut self) {
        self.release();
    }
}

impl Backend for Cuda {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn prepare(&mut self, setup: &Setup) -> Result<(), GpuError> {
        self.context(setup.sync)?;
        for (_, (graph, exec)) in self.graphs.drain() {
            // SAFETY: handles this backend instantiated, destroyed once (drained).
            unsafe {
                (self.api.cuGraphExecDestroy)(exec);
                (self.api.cuGraphDestroy)(graph);
            }
        }
        let records = self.records.take();
        self.free(records);
        while self.streams.len() < setup.streams as usize {
            let mut s = std::ptr::null_mut();
            // SAFETY: writes the new stream.
            let code = unsafe { (self.api.cuStreamCreate)(&mut s, STREAM_NON_BLOCKING) };
            self.check("cuStreamCreate", code)?;
            self.streams.push(s);
        }
        self.blocks = setup.kernel.blocks();
        self.spin_ns = setup.kernel.spin_ns();
        self.record_bytes = super::record_bytes(setup.kernel) as usize;
        self.records = Some(self.map(setup.slots * self.record_bytes)?);
        if let Launch::Graph(g) = setup.launch {
            self.build_graphs(setup, g as usize)?;
        }
        Ok(())
    }

    fn now(&self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    fn calibrate(&mut self, pings: u32) -> Result<Vec<Ping>, GpuError> {
        let cell = self.cell.take().ok_or_else(not_prepared)?;
        // SAFETY: zeroes the 64-byte cell before the kernel reads it.
        unsafe { std::ptr::write_bytes(cell.host, 0, cell.bytes) };
        let mut device = cell.device;
        let mut params = [(&mut device as *mut u64).cast::<c_void>()];
        // SAFETY: the ping kernel takes one u64, passed by pointer for the call's duration.
        let code = unsafe {
            (self.api.cuLaunchKernel)(
                self.ping,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                self.ping_stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        let result = self
            .check("cuLaunchKernel(ping)", code)
            .and_then(|()| (1..=pings).map(|seq| self.ping_once(&cell, seq)).collect());
        // SAFETY: as in ping_once: the stop value ends the kernel.
        unsafe { std::ptr::write_volatile(cell.host.cast::<u32>(), ptx::PING_STOP) };
        // SAFETY: waits for the ping kernel on its own stream.
        let sync = unsafe { (self.api.cuStreamSynchronize)(self.ping_stream) };
        self.cell = Some(cell);
        let pings = result?;
        self.check("cuStreamSynchronize(ping)", sync)?;
        Ok(pings)
    }

    fn launch(&mut self, stream: usize, slots: Range<usize>) -> Result<(), GpuError> {
        let s = self.streams[stream];
        if let Some(&(_, exec)) = self.graphs.get(&slots.start) {
            // SAFETY: an instantiated graph launched on a stream of this context.
            let code = unsafe { (self.api.cuGraphLaunch)(exec, s) };
            return self.check("cuGraphLaunch", code);
        }
        self.launch_one(s, slots.start)
    }

    fn done(&mut self, slot: usize) -> bool {
        let done = self
            .records
            .as_ref()
            .is_some_and(|r| Cuda::read_u32(r, slot * self.record_bytes) >= self.blocks);
        // the stamps, fenced by the device before its flag, are read after the flag
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        done
    }

    fn idle(&mut self) {
        std::hint::spin_loop();
    }

    fn sync(&mut self, stream: usize) -> Result<(), GpuError> {
        // SAFETY: a stream this backend created.
        let code = unsafe { (self.api.cuStreamSynchronize)(self.streams[stream]) };
        self.check("cuStreamSynchronize", code)
    }

    fn stamps(&self, slot: usize) -> DeviceStamps {
        let Some(r) = self.records.as_ref() else {
            return DeviceStamps::default();
        };
        let base = slot * self.record_bytes + ptx::HEADER;
        (0..self.blocks as usize).fold(
            DeviceStamps {
                start: u64::MAX,
                end: 0,
            },
            |acc, b| DeviceStamps {
                start: acc.start.min(Cuda::read_u64(r, base + 16 * b)),
                end: acc.end.max(Cuda::read_u64(r, base + 16 * b + 8)),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_older_than_cuda_11_is_told_the_version_the_ptx_needs() {
        let e = check_driver(10_020).unwrap_err().to_string();
        assert_eq!(
            e,
            "the CUDA driver is version 10.2 (10020); the lab's kernels (PTX ISA 7.0) need version 11.0 (11000) or newer"
        );
        assert!(check_driver(13_000).is_ok());
    }

    #[test]
    fn cuda_init_without_a_device_is_no_device_and_other_codes_name_the_call() {
        let e = no_device_or(
            "cuInit",
            100,
            "CUDA_ERROR_NO_DEVICE".into(),
            "no CUDA-capable device is detected".into(),
        );
        assert!(matches!(e, GpuError::NoDevice(_)), "{e}");
        assert!(
            e.to_string()
                .starts_with("no CUDA device: cuInit: CUDA_ERROR_NO_DEVICE"),
            "{e}"
        );
        let e = no_device_or(
            "cuCtxCreate_v2",
            2,
            "CUDA_ERROR_OUT_OF_MEMORY".into(),
            "out of memory".into(),
        );
        assert_eq!(
            e.to_string(),
            "cuCtxCreate_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
        );
    }

    #[test]
    fn an_exclusive_device_held_elsewhere_and_a_prohibited_one_are_named() {
        let e = held_elsewhere(0, "NVIDIA H100", 3, 46).unwrap().to_string();
        assert!(e.starts_with("CUDA device 0 (NVIDIA H100) is in exclusive-process compute mode: another process holds it"), "{e}");
        // The same error code on a device in default mode is the driver's own error.
        assert!(held_elsewhere(0, "NVIDIA H100", 0, 46).is_none());
        let e = check_compute_mode(1, "NVIDIA H100", 2)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("device 1 (NVIDIA H100) is in prohibited compute mode"),
            "{e}"
        );
        assert!(check_compute_mode(0, "x", 3).is_ok());
        assert!(check_compute_mode(0, "x", 0).is_ok());
    }

    #[test]
    fn a_machine_without_the_library_is_told_its_name() {
        let Err(e) = Api::load("libcuda-not-here.so.1") else {
            panic!("loaded a library that is not there")
        };
        let text = e.to_string();
        assert!(
            text.starts_with("cannot load libcuda-not-here.so.1: "),
            "{text}"
        );
    }

    #[test]
    fn a_library_without_the_driver_api_is_told_the_first_missing_function() {
        let Err(e) = Api::load("libc.so.6") else {
            panic!("libc has no cuInit")
        };
        assert!(
            e.to_string().starts_with("libc.so.6 has no cuInit: "),
            "{e}"
        );
    }
}
