//! Images from local sources (an OCI image layout, a rootfs tarball), verified and imported
//! through the engine.
