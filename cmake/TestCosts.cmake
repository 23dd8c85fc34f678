# What each long test takes, in seconds of the asan stage here (its ctest
# timing data): ctest starts the costliest first, so a 2-core run
# does not end waiting on one of them. A clean clone (CI) has no timing data
# of its own; once a build directory has some, ctest goes by that instead.
# Tests not listed cost 0 (they are short). Refresh from
# build/asan/Testing/Temporary/CTestCostData.txt when the order drifts.
foreach(entry
    load_test=1000 mesh_array_test=1000
    reach_lab_test=254 remote_jobs_test=248 faults_test=107 slurm_executor_test=83
    network_faults_test=82 docker_habits_test=74 mesh_run_test=70 mesh_jobs_test=70
    peer_link_test=66 run_options_test=56 metering_test=50 mesh_verify_test=49
    podman_executor_test=48 files_test=48 forward_test=47 groups_test=46 mesh_jobs_sim_test=40
    api_security_test=37 daemon_cli_test=35 verification_fuzz=33 provider_abuse_test=31
    portmap_lab_test=30 nat_lab_test=27 logs_reattach_test=27 dashboard_browser_test=26
    mux_fuzz=23 docker_executor_test=22 queue_habits_test=21 refusals_test=20
    provider_jobs_test=16 mux_test=15 doctor_test=15)
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
