//! Links the module for Node-API: the symbols come from the `node` process that loads it.
fn main() {
    napi_build::setup();
}
