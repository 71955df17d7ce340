plugins {
    id("com.android.application")
    id("org.jetbrains.kotlin.android")
    id("com.chaquo.python")
}

android {
    namespace = "dev.edgerun.app"
    compileSdk = 35

    defaultConfig {
        applicationId = "dev.edgerun.app"
        minSdk = 24
        targetSdk = 35
        versionCode = 1
        versionName = "{{EDGERUN_VERSION}}"
        ndk {
            // the ABIs Chaquopy ships numpy for
            abiFilters += listOf("arm64-v8a", "x86_64")
        }
    }
    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
    kotlinOptions {
        jvmTarget = "17"
    }
}

chaquopy {
    defaultConfig {
        version = "3.11"
        pip {
            install("numpy")
            // edgerun itself: the pure-Python wheel `edgerun pack` put next to this file
            install("wheels/{{EDGERUN_WHEEL}}")
        }
        // the packed model and its manifest are read from real files at run time
        extractPackages("edgerun_app")
    }
}
