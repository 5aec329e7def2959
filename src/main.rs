//! `kubectl-stack`: the kubectl plugin binary. All logic lives in the library.

fn main() -> std::process::ExitCode {
    kubectl_stack::run(std::env::args_os())
}
