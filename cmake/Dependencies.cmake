# Every third-party library comes from a Debian 12 package (scripts/packages.txt).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenSSL 3.0 REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)
find_package(tomlplusplus REQUIRED)
pkg_check_modules(QRENCODE REQUIRED IMPORTED_TARGET libqrencode)
# The opt-in DHT of discovery.dht (src/discovery/dht_node.h).
pkg_check_modules(OPENDHT REQUIRED IMPORTED_TARGET opendht)
# The QUIC carrier (src/net/quic): ngtcp2 0.12 with its GnuTLS crypto backend.
pkg_check_modules(NGTCP2 REQUIRED IMPORTED_TARGET GLOBAL libngtcp2 libngtcp2_crypto_gnutls gnutls)
