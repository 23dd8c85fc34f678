# What each long test takes, in seconds of the asan stage here (its ctest
# timing data): ctest starts the costliest first, so a 2-core run
# does not end waiting on one of them. A clean clone (CI) has no timing data
# of its own; once a build directory has some, ctest goes by that instead.
# Tests not listed cost 0 (they are short). Refresh from
# build/asan/Testing/Temporary/CTestCostData.txt when the order drifts.
foreach(entry
    load_test=1000 mesh_array_test=1000
    remote_jobs_test=125 reach_lab_test=114 faults_test=88 network_faults_test=73 mesh_jobs_test=66
    slurm_executor_test=45 groups_test=44 mesh_run_test=42 verification_fuzz=38 run_options_test=37
    forward_test=35 docker_executor_test=33 peer_link_test=30 mux_fuzz=29 api_security_test=28
    metering_test=27 mesh_verify_test=25 mux_test=23 portmap_lab_test=22 provider_abuse_test=20
    logs_reattach_test=18 mesh_sim_test=17 daemon_cli_test=15)
  string(REPLACE "=" ";" pair "${entry}")
  list(GET pair 0 test)
  list(GET pair 1 seconds)
  set(YONDER_TEST_COST_${test} ${seconds})
endforeach()

# Called by yonder_test and yonder_fuzz once the test exists.
function(yonder_test_cost name)
  if(DEFINED YONDER_TEST_COST_${name})
    set_tests_properties(${name} PROPERTIES COST ${YONDER_TEST_COST_${name}})
  endif()
endfunction()
