//! `kubectl-stack`: the kubectl plugin binary. All logic lives in the library.

fn main() -> std::process::ExitCode {
    kubectl_stack::return_large_buffers();
    kubectl_stack::run(std::env::args_os())
}
